"""Generated logs of each supported format, rendered with the trainers' own format strings from
known values, parse back to those values (within the printed precision) as one step series."""
from __future__ import annotations

import math
from typing import Callable

import numpy as np
import pytest

from precdx.collectors.logs.reader import parse_lines
from precdx.collectors.logs.series import series_from_records

STEPS = list(range(1, 41))


def _loss(s: int) -> float:
    return 3.0 * math.exp(-s / 30) + 1.0 + 0.01 * ((s * 7919) % 13) / 13


def _gn(s: int) -> float:
    return 1.0 + 0.5 * math.sin(s)


def _lr(s: int) -> float:
    return 1e-4 * min(1.0, s / 10)


FORMATS: dict[str, tuple[Callable[[int], list[str]], str, float, bool]] = {
    # name: (render one step -> lines, framework, relative precision of the printed loss, grad norm printed)
    "megatron": (lambda s: [f" [2025-03-24 17:50:01.123456] iteration {s:8d}/{40:8d} | consumed samples: {8 * s:12d} | "
                            f"elapsed time per iteration (ms): 61.3 | learning rate: {_lr(s):.6E} | global batch size: "
                            f"{8:5d} | lm loss: {_loss(s):.6E} | loss scale: 1.0 | grad norm: {_gn(s):.3f} | "
                            f"number of skipped iterations: {0:3d} | number of nan iterations: {0:3d} |"],
                 "megatron", 1e-6, True),
    "mindspeed_fsdp2": (lambda s: [f"INFO [2026-06-22 19:25:37] >>  iteration {s:8d}/{40:8d} | consumed samples: "
                                   f"{8 * s:10d} | learning rate: {_lr(s):.6E} | global batch size: {8:5d} | lm loss: "
                                   f"{_loss(s):.6E} | grad norm: {_gn(s):.3f} | max_memory_allocated(GB): 19.07 |"],
                        "megatron", 1e-6, True),
    "deepspeed_pipe": (lambda s: [f"steps: {s} loss: {_loss(s):0.4f} iter time (s): 0.512 samples/sec: 125.000"],
                       "deepspeed-pipe", 1e-4, False),
    "hf_dict": (lambda s: [f"{s}/40 [00:0{s % 10}<00:41, 2.86it/s]  {{'loss': {round(_loss(s), 4)}, 'grad_norm': "
                           f"{_gn(s)!r}, 'learning_rate': {_lr(s)!r}, 'epoch': {s / 40:.2f}}}"],
                "hf_trainer", 1e-4, True),
    "torchtitan_ansi": (lambda s: [f"[rank0]:[titan] 2025-11-25 19:45:01,441 - root - INFO - \x1b[31mstep: {s:2}  "
                                   f"\x1b[32mloss: {_loss(s):8.5f}  \x1b[33mgrad_norm: {_gn(s):7.4f}  \x1b[38;2;180;60;0m"
                                   f"memory:  1.21GiB(0.86%)  \x1b[34mtps: 5,756  \x1b[36mtflops: 0.41  \x1b[35mmfu: 0.04%"
                                   f"\x1b[39m"], "torchtitan", 1e-5, True),
    "nemo2": (lambda s: [f"Training epoch 0, iteration {s - 1}/39 | lr: {_lr(s):.4} | global_batch_size: 32 | "
                         f"global_step: {s} | reduced_train_loss: {_loss(s):.4} | train_step_timing in s: 0.189"],
              "nemo2", 1e-3, False),
    "nemo_bar": (lambda s: [f"Epoch 0:  50%|█████     | {s}/80 [00:31<00:00,  1.27it/s, loss={_loss(s):.3g}, v_num=, "
                            f"reduced_train_loss={_loss(s):.4f}, global_step={s:.3f}, consumed_samples={32.0 * s}]"],
                 "nemo_bar", 1e-4, False),
    "olmo": (lambda s: [f"2024-08-06 09:59:26.181 host:0  olmo.train:908  INFO    [step={s}/40,epoch=0]",
                        f"    optim/total_grad_norm={_gn(s):.4f}", f"    train/CrossEntropyLoss={_loss(s):.4f}",
                        "    throughput/total_tokens=1,048,576"], "olmo", 1e-4, True),
    "nanogpt": (lambda s: [f"iter {s}: loss {_loss(s):.4f}, time 1099.34ms, mfu 15.34%"], "nanogpt", 1e-4, False),
    "nanotron": (lambda s: [f"08/31/2024 14:37:31 [INFO|DP=0|PP=0|TP=0]: iteration: {s} / 40 | consumed_tokens: "
                            f"{s * 0.512:.3g}K | lm_loss: {_loss(s):.3g} | lr: {_lr(s):.3g} | grad_norm: {_gn(s):.3g}"],
                 "nanotron", 5e-3, True),
    "mmengine": (lambda s: [f"2024/05/07 11:45:16 - mmengine - INFO - Iter(train) [{s:4d}/2046]  lr: {_lr(s):.4e}  "
                            f"eta: 1:25:37  time: 2.9098  data_time: 0.0234  memory: 15266  loss: {_loss(s):.4f}  "
                            f"grad_norm: {_gn(s):.4f}"], "mmengine", 1e-4, True),
    "veomni": (lambda s: [f"Epoch 1/1:   0%|          | {s}/38 [00:05<4275:39:26,  4.02s/it, loss: {_loss(s):.2f}, "
                          f"grad_norm: {_gn(s):.2f}, lr: {_lr(s):.2e}]"], "veomni", 5e-3, True),
}


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_generated_log_round_trips(name: str) -> None:
    render, framework, precision, has_gn = FORMATS[name]
    lines = ["some header line", "WARNING: unrelated"]
    for s in STEPS:
        lines += render(s)
        lines.append("[Rank 0] (after 1 iterations) memory (MB) | allocated: 21.85 | max allocated: 68.16")
    series = series_from_records(list(parse_lines(lines)))
    assert series is not None and series.framework == framework
    assert series.steps.tolist() == STEPS
    want = np.array([_loss(s) for s in STEPS])
    assert np.allclose(series.loss, want, rtol=precision, atol=0)
    if has_gn:
        assert np.allclose(series.grad_norm, [_gn(s) for s in STEPS], rtol=precision, atol=0.0051)  # 2-decimal formats
    assert not series.nonfinite.any() and series.restarts == 0


def test_megatron_nan_and_skip_semantics_round_trip() -> None:
    render = FORMATS["megatron"][0]
    lines = [ln for s in STEPS for ln in render(s)]
    # step 10: NaN drops the loss key; step 20: every iteration of the window skipped (loss 0.0)
    lines[9] = lines[9].replace(f"lm loss: {_loss(10):.6E} | ", "").replace("grad norm: ", "grad norm: nan | x: ")
    lines[19] = lines[19].replace(f"{_loss(20):.6E}", "0.000000E+00").replace(
        "number of skipped iterations:   0", "number of skipped iterations:   1")
    s = series_from_records(list(parse_lines(lines)))
    assert s is not None
    assert s.loss_bad.tolist().count(True) == 1 and bool(s.loss_bad[9])
    assert math.isnan(s.loss[19]) and not s.loss_bad[19] and s.skipped[19] == 1


def test_restart_keeps_last_occurrence() -> None:
    render = FORMATS["torchtitan_ansi"][0]
    lines = [ln for s in range(1, 21) for ln in render(s)] + [ln for s in range(15, 31) for ln in render(s)]
    s = series_from_records(list(parse_lines(lines)))
    assert s is not None and s.restarts == 1 and s.steps.tolist() == list(range(1, 31))
