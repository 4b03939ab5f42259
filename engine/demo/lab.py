"""Runs one demo case: the baseline, the faulty target (and its rerun when the fault needs
one), then writes the case folder in the scenario layout with its expected.yaml."""
from __future__ import annotations

import dataclasses
import shutil
import time
from pathlib import Path

from engine.demo import artefacts
from engine.demo.catalogue import FAULTS, Fault
from engine.demo.device import DeviceProfile
from engine.demo.training import TrainConfig, train
from engine.errors import PrecdxError

MIN_STEPS = 8


def _configs(fault: Fault, steps: int, seed: int) -> tuple[TrainConfig, TrainConfig]:
    base = TrainConfig(train_iters=steps, seed=seed, lr_warmup_iters=max(1, steps // 8))
    target = base
    if fault.name == "hyperparameter":
        target = dataclasses.replace(base, lr=base.lr * 2)
    elif fault.name == "data_preprocessing":
        target = dataclasses.replace(base, token_offset=2, data_path="synth_text_v2_document")
    elif fault.name == "wiring":
        target = dataclasses.replace(base, model=dataclasses.replace(base.model, post_norm=True))
    elif fault.name == "loss_scale_collapse":
        base = dataclasses.replace(base, fp16=True)
        target = dataclasses.replace(target, fp16=True)
    return base, target


def _nan_step(steps: int) -> int:
    """0-based step at which the nan_op fault fires: late enough to show a healthy start."""
    return max(2, (steps * 2) // 3)


def run_case(fault_name: str, out_dir: Path, *, steps: int = 40, seed: int = 1234) -> Path:
    fault = FAULTS.get(fault_name)
    if fault is None:
        raise PrecdxError(f"unknown demo fault {fault_name!r}; choose one of {', '.join(FAULTS)}")
    if steps < MIN_STEPS:
        raise PrecdxError(f"the demo needs at least {MIN_STEPS} steps to show a trend (got {steps})")
    if out_dir.exists() and any(out_dir.iterdir()):
        if not (out_dir / "expected.yaml").is_file():
            raise PrecdxError("output folder exists and is not a demo case; refusing to overwrite it",
                              path=str(out_dir))
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)

    base_cfg, target_cfg = _configs(fault, steps, seed)
    dump_step = _nan_step(steps) if fault.name == "nan_op" else 0
    for role in fault.runs:
        target = role != "baseline"
        cfg = target_cfg if target else base_cfg
        profile = DeviceProfile(target=target, fault=fault.name if target else None,
                                noise_seed=seed + 1, launch_seed=seed + 100 + len(role),
                                nan_step=_nan_step(steps) if fault.name == "nan_op" else None)
        dumped = role in fault.dump_runs and fault.dump_mode is not None
        run_dir = out_dir / role
        started = time.time()
        result = train(cfg, profile, dump_dir=run_dir / "msprobe_dump" if dumped else None,
                       dump_step=dump_step if dumped else None,
                       summary_mode=fault.dump_mode or "statistics",
                       overflow_from=max(3, steps // 4) if (target and fault.name == "loss_scale_collapse") else None)
        probe_config = None
        if dumped:
            probe_config = {"task": "statistics", "dump_path": "./msprobe_dump", "rank": [],
                            "step": [dump_step], "level": "mix", "async_dump": False, "extra_info": True,
                            "statistics": {"scope": [], "list": [], "data_mode": ["all"],
                                           "summary_mode": fault.dump_mode, "tensor_list": []}}
        artefacts.write_run(run_dir, cfg, "npu" if target else "gpu", result, started, probe_config)
    artefacts.write_expected(out_dir, fault.failure_mode, fault.runs, fault.expected)
    return out_dir
