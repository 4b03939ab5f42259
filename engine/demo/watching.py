"""The watch demo (``precdx demo --watch``): train the baseline ("GPU") job, train the faulty
target ("NPU") under ``precdx.watch`` against it, let the watcher capture the breaching step,
replay that step on the baseline side and hand the case to ``precdx diagnose``.

Layout of ``out_dir``: ``gpu_run/`` (the baseline job's log, launch script, env and pip
listings), ``npu_job/`` (the target's launch script, attached to the watched run), ``npu_run1/`` (nondeterministic fault only: the target's first launch, watched too,
whose log the rerun must reproduce), ``case/`` (the watcher's case folder) and
``expected.yaml`` (the injected failure mode).

The module-level functions are the replay entry points for demo cases::

    precdx replay precdx-demo/case --model-fn precdx.demo.watching:baseline_model \\
        --step-fn precdx.demo.watching:demo_step --batch-fn precdx.demo.watching:baseline_batch
"""
from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import torch

from precdx.demo import artefacts
from precdx.demo.catalogue import FAULTS
from precdx.demo.device import DeviceProfile, device_numerics
from precdx.demo.lab import MIN_STEPS, _configs, _nan_step
from precdx.demo.model import build_model
from precdx.demo.training import TrainConfig, forward_backward, make_batch, train
from precdx.errors import PrecdxError

MODEL_FN = "precdx.demo.watching:baseline_model"
STEP_FN = "precdx.demo.watching:demo_step"
BATCH_FN = "precdx.demo.watching:baseline_batch"
TARGET_STEP_FN = "precdx.demo.watching:target_launch_step"
REPLAY_LAUNCH = 7919  # launch seed offset of a replay on the target device: a launch of its own


# ----------------------------------------------------------------------------- replay entry points
def baseline_model() -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    """The demo's model and optimizer as the baseline job builds them (pre-norm, AdamW)."""
    cfg = TrainConfig()
    model = build_model(cfg.model, cfg.seed)
    decay = [p for n, p in model.named_parameters() if p.ndim > 1]
    no_decay = [p for n, p in model.named_parameters() if p.ndim <= 1]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=cfg.lr, betas=(cfg.adam_beta1, cfg.adam_beta2), eps=cfg.adam_eps)
    return model, optimizer


def demo_step(model: torch.nn.Module, optimizer: Any, batch: dict[str, Any]) -> torch.Tensor:
    """One demo iteration's forward and loss-scaled backward (the training loop's own code)."""
    return forward_backward(model, batch["tokens"], batch["labels"], float(batch.get("loss_scale", 1.0)))


def baseline_batch(iteration: int, saved: dict[str, Any]) -> dict[str, Any]:
    """The batch the baseline job's data pipeline reads at ``iteration`` (same seed, its own
    preprocessing), with the watched step's loss scale."""
    cfg = TrainConfig(seed=int(saved["seed"]))
    tokens, labels = make_batch(cfg, iteration, cfg.seed)
    return dict(saved, tokens=tokens, labels=labels)


def target_launch_step(model: torch.nn.Module, optimizer: Any, batch: dict[str, Any]) -> torch.Tensor:
    """``demo_step`` on the emulated target device in a launch of its own (its matmul is the
    nondeterministic one): the reference side of a watched rerun."""
    seed = int(batch["seed"])
    profile = DeviceProfile(target=True, fault="nondeterministic_op", noise_seed=seed + 1,
                            launch_seed=seed + REPLAY_LAUNCH, step=int(batch["iteration"]) - 1)
    with device_numerics(profile):
        return demo_step(model, optimizer, batch)


# ----------------------------------------------------------------------------- the demo
def _prepare(out_dir: Path) -> None:
    if out_dir.exists() and any(out_dir.iterdir()):
        if not (out_dir / "case" / "watch.json").is_file():
            raise PrecdxError("output folder exists and is not a watch demo; refusing to overwrite it",
                              path=str(out_dir))
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)


def run_watch_case(fault_name: str, out_dir: Path | str, *, steps: int = 24, seed: int = 1234,
                   replay_steps: bool = True, quiet: bool = False) -> Path:
    """Baseline, watched target (and its first launch for the rerun fault), replay of the
    captured step on the reference side; returns the case folder (``out_dir/case``)."""
    from precdx.watch.replayer import replay
    from precdx.watch.watcher import Watcher

    fault = FAULTS.get(fault_name)
    if fault is None:
        raise PrecdxError(f"unknown demo fault {fault_name!r}; choose one of {', '.join(FAULTS)}")
    if not fault.watchable:
        raise PrecdxError(f"demo fault {fault_name!r} has no watched variant; --watch supports "
                          + ", ".join(name for name, f in FAULTS.items() if f.watchable))
    if steps < MIN_STEPS:
        raise PrecdxError(f"the demo needs at least {MIN_STEPS} steps to show a trend (got {steps})")
    out_dir = Path(out_dir)
    _prepare(out_dir)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a model this small only loses time to thread hand-offs
    try:
        return _run(fault, out_dir, steps, seed, replay_steps, quiet)
    finally:
        torch.set_num_threads(threads)


def _run(fault: Any, out_dir: Path, steps: int, seed: int, replay_steps: bool, quiet: bool) -> Path:
    from precdx.watch.replayer import replay
    from precdx.watch.watcher import Watcher

    base_cfg, target_cfg = _configs(fault, steps, seed)
    gpu = out_dir / "gpu_run"
    started = time.time()
    artefacts.write_run(gpu, base_cfg, "gpu", train(base_cfg, DeviceProfile(target=False)), started, None)

    rerun = fault.name == "nondeterministic_op"
    hint = ({"model_fn": MODEL_FN, "step_fn": TARGET_STEP_FN} if rerun else
            {"model_fn": MODEL_FN, "step_fn": STEP_FN, "batch_fn": BATCH_FN})
    # the target job's launch script, attached to the watched run as a user would attach theirs
    script = out_dir / "npu_job" / "pretrain_gpt.sh"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(artefacts.launch_script(target_cfg, "npu"), encoding="utf-8")
    common = dict(baseline=gpu, attach=[script], environment=False,
                  step_fn=demo_step, quiet=quiet, framework="megatron-demo", total_steps=steps,
                  replay_hint=hint)

    def launch(n: int, out: Path, **kw: Any):
        profile = DeviceProfile(target=True, fault=fault.name, noise_seed=seed + 1, launch_seed=seed + 100 + n,
                                nan_step=_nan_step(steps) if fault.name == "nan_op" else None)
        overflow = max(3, steps // 4) if fault.name == "loss_scale_collapse" else None
        return train(target_cfg, profile, overflow_from=overflow,
                     watch_with=lambda model, opt: Watcher(model, opt, out=out, **common, **kw))

    case = out_dir / "case"
    if rerun:
        launch(1, out_dir / "npu_run1")
        launch(2, case, rerun_of=out_dir / "npu_run1" / "target")
    else:
        launch(1, case)
    if replay_steps:
        from precdx.watch.watcher import load_status
        for entry in load_status(case).get("captured", []):
            if rerun:
                replay(case, entry["iteration"], model_fn=baseline_model, step_fn=target_launch_step, quiet=quiet)
            else:
                replay(case, entry["iteration"], model_fn=baseline_model, step_fn=demo_step,
                       batch_fn=baseline_batch, quiet=quiet)
    artefacts.write_expected(out_dir, fault.failure_mode, ("case",), fault.expected)
    return case
