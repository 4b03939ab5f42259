"""Long training runs of each framework, generated line by line in the format its real logs show
(../shared/real-logs, log-formats.md): what a user's multi-gigabyte log mostly is — one step after
another — with values that move the way they do in training (loss falling with noise, grad norm
wandering, learning rate warming up then decaying, timers jittering, counters growing in width),
so the number of distinct line widths is realistic too. Every so often a line the parsers keep as
an event (an overflow, a skipped step, a checkpoint save) and lines no parser needs (memory reports,
warnings).

Used by bench/logs --runs. Deterministic (seeded); no timing here.
"""
from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Callable, Iterator


class Run:
    """The values of one run at step s: plausible and deterministic."""

    def __init__(self, seed: int, total: int = 500_000):
        self.rng = random.Random(seed)
        self.total = total

    def loss(self, s: int) -> float:
        return 2.0 + 8.5 * math.exp(-s / 400) + 0.6 / math.sqrt(1 + s / 50) + self.rng.gauss(0, 0.04)

    def grad_norm(self, s: int) -> float:
        return abs(self.rng.lognormvariate(-0.3, 0.6)) + (30.0 if s < 20 else 0.0)

    def lr(self, s: int) -> float:
        warm = 2000
        peak = 3e-4
        if s < warm:
            return peak * s / warm
        return 3e-5 + (peak - 3e-5) * 0.5 * (1 + math.cos(math.pi * min(1.0, s / self.total)))

    def jitter(self, x: float, rel: float = 0.03) -> float:
        return x * (1 + self.rng.uniform(-rel, rel))


def _clock(s: int, secs: float = 1.13) -> tuple[int, int, int, int, int]:
    t = int(s * secs)
    d, t = divmod(t, 86400)
    h, t = divmod(t, 3600)
    m, sec = divmod(t, 60)
    return 1 + d % 28, h, m, sec, (s * 7919) % 1000


def megatron_lm(r: Run) -> Iterator[str]:
    for s in range(1, 10**9):
        d, h, m, sec, _ = _clock(s, 61.3e-3 * 20)
        yield (f" [2025-03-{d:02d} {h:02d}:{m:02d}:{sec:02d}] iteration {s:8d}/ {r.total:8d} | consumed samples: "
               f"{s * 256:12d} | elapsed time per iteration (ms): {r.jitter(1361.3):.1f} | throughput per GPU "
               f"(TFLOP/s/GPU): {r.jitter(181.2):.1f} | learning rate: {r.lr(s):.6E} | global batch size:   256 | "
               f"lm loss: {r.loss(s):.6E} | loss scale: 1.0 | grad norm: {r.grad_norm(s):.3f} | number of skipped "
               f"iterations:   0 | number of nan iterations:   0 |\n")
        if s % 100 == 0:
            yield (f"[Rank 0] (after {s} iterations) memory (MB) | allocated: 21851.85 | max allocated: "
                   f"{r.jitter(68160.16):.2f} | reserved: 96000.00 | max reserved: 96000.00\n")
        if s % 2000 == 0:
            yield f"saving checkpoint at iteration {s:8d} to /ckpt/run1\n"
            yield f"  successfully saved checkpoint from iteration {s:8d} to /ckpt/run1 [ t 1/1, p 1/1 ]\n"


def megatron_deepspeed(r: Run) -> Iterator[str]:
    for s in range(1, 10**9):
        yield (f"[default7]: iteration {s:8d}/  115311 | consumed samples: {s * 2048:12d} | consumed tokens: "
               f"{s * 2048 * 2048:12d} | elapsed time per iteration (s): {r.jitter(106.2):.2f} | learning rate: "
               f"{r.lr(s):.3E} | global batch size:  2048 | lm loss: {r.loss(s):.6E} | grad norm: "
               f"{r.grad_norm(s):.3f} | num zeros: 0.0 | number of skipped iterations:   0 | number of nan "
               f"iterations:   0 | samples per second: {r.jitter(19.24):.3f} | TFLOPs: {r.jitter(147.3):.2f} |\n")
        if s % 200 == 0:
            yield (f"[default0]:[Rank 0] (after {s} iterations) memory (MB) | allocated: 9411.2 | max allocated: "
                   f"{r.jitter(41000.0):.1f} | reserved: 52000.0 | max reserved: 52000.0\n")


def megatron_deepspeed_wrapped(r: Run) -> Iterator[str]:
    """The same records as a terminal 160 columns wide hard-wrapped them (BigScience's published
    logs read so: tr11-176b-wrapped-lines.log); the parser joins the lines of each."""
    for line in megatron_deepspeed(r):
        body = line.rstrip("\n")
        yield "\n".join(body[a:a + 160] for a in range(0, len(body), 160)) + "\n"


def deepspeed(r: Run) -> Iterator[str]:
    """DeepSpeed-Chat step summaries (every 10 steps DeepSpeed's own step/timer lines) with an
    occasional overflow."""
    scale = 65536
    for s in range(1, 10**9):
        if s % 997 == 0:
            yield (f"[2023-04-18 01:46:53,259] [INFO] [loss_scaler.py:181:update_scale] [deepspeed] OVERFLOW! "
                   f"Rank 0 Skipping step. Attempted loss scale: {scale}, reducing to {scale // 2}\n")
        yield f"epoch: 0|step: {s}|ppo_ep: 1|act_loss: {r.loss(s) / 10}|cri_loss: {r.loss(s) / 20}|unsuper_loss: 0.0\n"
        if s % 10 == 0:
            _, h, m, sec, ms = _clock(s, 0.7)
            yield (f"[2023-04-18 {h:02d}:{m:02d}:{sec:02d},{ms:03d}] [INFO] [logging.py:96:log_dist] [Rank 0] "
                   f"step={s}, skipped={s // 997}, lr=[{r.lr(s)}, {r.lr(s)}], mom=[(0.9, 0.95), (0.9, 0.95)]\n")
            yield (f"[2023-04-18 {h:02d}:{m:02d}:{sec:02d},{ms:03d}] [INFO] [timer.py:199:stop] epoch=0/micro_step={s}"
                   f"/global_step={s}, RunningAvgSamplesPerSec={r.jitter(173.44)}, CurrSamplesPerSec="
                   f"{r.jitter(171.9)}, MemAllocated=3.96GB, MaxMemAllocated=22.95GB\n")


def hf_trainer(r: Run) -> Iterator[str]:
    """HF Trainer with logging_steps=1 in a file: a tqdm progress line per step, the logged dict
    after it; an eval every 500 steps. A run longer than max_steps is the same job resumed (its
    bar starts again; a bar never passes 100%)."""
    total = 200_000
    for s in range(1, 10**9):
        b = (s - 1) % total + 1  # (the step on the bar)
        pct = 100 * b // total
        el = int(b * 1.6)
        left = int((total - b) * 1.6)
        yield (f"{pct:3d}%|{'█' * (pct // 10):10s}| {b}/{total} [{el // 3600:02d}:{el // 60 % 60:02d}:{el % 60:02d}<"
               f"{left // 3600:02d}:{left // 60 % 60:02d}:{left % 60:02d}, {r.jitter(1.6):.2f}s/it]\n")
        yield (f"{{'loss': {round(r.loss(s), 4)}, 'grad_norm': {r.grad_norm(s)}, 'learning_rate': {r.lr(s)}, "
               f"'epoch': {round(s / total * 3, 2)}}}\n")
        if s % 500 == 0:
            yield f"{{'eval_loss': {r.loss(s) + 0.1}, 'eval_runtime': {r.jitter(58.1):.4f}, 'epoch': {round(s / total * 3, 2)}}}\n"


def torchtitan(r: Run) -> Iterator[str]:
    for s in range(1, 10**9):
        _, h, m, sec, ms = _clock(s)
        tps = int(r.jitter(7300))
        yield (f"[rank0]:[titan] 2026-05-18 {h:02d}:{m:02d}:{sec:02d},{ms:03d} - root - INFO - step: {s:2d}  loss: "
               f"{r.loss(s):8.5f}  grad_norm: {r.grad_norm(s):7.4f}  memory:  9.46GiB(64.99%)  tps: {tps:,}  "
               f"tflops: {r.jitter(0.52):.2f}  mfu: 0.17%\n")
        if s % 1000 == 0:
            yield f"[rank0]:[titan] 2026-05-18 {h:02d}:{m:02d}:{sec:02d},{ms:03d} - root - INFO - Saving the checkpoint (or staging if async is enabled).\n"


def nemo(r: Run) -> Iterator[str]:
    for s in range(1, 10**9):
        validation = f"Validation: iteration 1/1, val_loss: {r.loss(s) + 0.2:.4g}\n" if s % 1000 == 0 else ""
        yield (f"Training epoch 0, iteration {s}/{r.total - 1} | lr: {r.lr(s):.4g} | consumed_samples: {s * 8} | "
               f"global_batch_size: 8 | global_step: {s} | reduced_train_loss: {r.loss(s):.4g} | train_step_timing "
               f"in s: {r.jitter(0.0315):.4g}\n{validation}")


def nanotron(r: Run) -> Iterator[str]:
    def k(x: float) -> str:
        return f"{x / 1000:.3g}K" if x >= 1000 else f"{x:.3g}"

    for s in range(1, 10**9):
        _, h, m, sec, _ = _clock(s, 0.3)
        yield (f"08/31/2024 {h:02d}:{m:02d}:{sec:02d} [INFO|DP=0|PP=0|TP=0]: iteration: {s} / {r.total} | "
               f"consumed_tokens: {k(512 * s)} | elapsed_time_per_iteration_ms: {k(r.jitter(11.8))} | tokens_per_sec: "
               f"{k(r.jitter(43200))} | tokens_per_sec_per_gpu: {k(r.jitter(43200))} | global_batch_size: 2 | lm_loss: "
               f"{r.loss(s):.3g} | lr: {r.lr(s):.3g} | model_tflops_per_gpu: {r.jitter(0.00744):.3g} | "
               f"hardware_tflops_per_gpu: {r.jitter(0.00744):.3g} | grad_norm: {r.grad_norm(s):.3g} | "
               f"cuda_memory_allocated: 67.4M | cuda_max_memory_reserved: 520M | hd_total_memory_tb: 1.97T | "
               f"hd_used_memory_tb: 1.3T | hd_free_memory_tb: 568G\n")


def nanogpt(r: Run) -> Iterator[str]:
    for s in range(0, 10**9, 10):
        yield f"iter {s}: loss {r.loss(s):.4f}, time {r.jitter(1097.3):.2f}ms, mfu {r.jitter(15.34, 0.01):.2f}%\n"
        if s % 2000 == 0:
            yield f"step {s}: train loss {r.loss(s):.4f}, val loss {r.loss(s) + 0.05:.4f}\n"
            yield "saving checkpoint to out\n"


def olmo(r: Run) -> Iterator[str]:
    for s in range(1, 10**9):
        _, h, m, sec, ms = _clock(s, 39.3)
        yield f"2024-08-06 {h:02d}:{m:02d}:{sec:02d}.{ms:03d} intern-studio-160750:0  olmo.train:908  INFO    [step={s}/739328,epoch=0]\n"
        loss = r.loss(s)
        yield f"    optim/total_grad_norm={r.grad_norm(s):.4g}\n"
        yield f"    train/CrossEntropyLoss={loss:.4g}\n"
        yield f"    train/Perplexity={math.exp(loss):,.3f}\n"
        yield f"    throughput/total_tokens={s * 1048576:,}\n"
        yield f"    throughput/device/tokens_per_second={int(r.jitter(26668)):,}\n"
        yield f"    System/Peak GPU Memory (MB)={int(r.jitter(53695, 0.001)):,}\n"


def xtuner(r: Run) -> Iterator[str]:
    for s in range(10, 10**9, 10):
        _, h, m, sec, _ = _clock(s, 2.9)
        eta = int((r.total - s) * 2.9)
        yield (f"2024/05/07 {h:02d}:{m:02d}:{sec:02d} - mmengine - INFO - Iter(train) [{s:4d}/{r.total}]  lr: "
               f"{r.lr(s):.4e}  eta: {eta // 86400} days, {eta // 3600 % 24}:{eta // 60 % 60:02d}:{eta % 60:02d}  time: "
               f"{r.jitter(2.91):.4f}  data_time: {r.jitter(0.0211):.4f}  memory: 15266  loss: {r.loss(s):.4f}  "
               f"grad_norm: {r.grad_norm(s):.4f}\n")


def veomni(r: Run) -> Iterator[str]:
    total = 3828049
    for s in range(1, 10**9):
        el = int(s * 2.2)
        left = int((total - s) * 2.2)
        yield (f"Epoch 1/1:   0%|          | {s}/{total} [{el // 3600:02d}:{el // 60 % 60:02d}:{el % 60:02d}<"
               f"{left // 3600}:{left // 60 % 60:02d}:{left % 60:02d},  {r.jitter(2.2):.2f}s/it, loss: {r.loss(s):.2f}, "
               f"grad_norm: {r.grad_norm(s):.2f}, lr: {r.lr(s):.2e}]\n")


RUNS: dict[str, Callable[[Run], Iterator[str]]] = {
    "megatron-lm": megatron_lm, "megatron-deepspeed": megatron_deepspeed,
    "megatron-deepspeed-wrapped": megatron_deepspeed_wrapped, "deepspeed": deepspeed,
    "hf-transformers": hf_trainer, "torchtitan": torchtitan, "nemo": nemo, "nanotron": nanotron,
    "nanogpt": nanogpt, "olmo": olmo, "xtuner-mmengine": xtuner, "veomni": veomni,
}


def write_run(name: str, path: Path, size_mb: float, seed: int = 0) -> int:
    """Writes about size_mb of framework `name`'s run to path; returns the number of lines."""
    target = int(size_mb * 1024 * 1024)
    written = n = 0
    buf: list[str] = []
    with open(path, "w", encoding="utf-8") as fh:
        for line in RUNS[name](Run(seed)):  # (a line, or a few)
            buf.append(line)
            written += len(line)
            n += line.count("\n")
            if len(buf) >= 4096:
                fh.write("".join(buf))
                buf.clear()
            if written >= target:
                break
        fh.write("".join(buf))
    return n
