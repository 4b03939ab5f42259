"""Fault-injection demo lab: trains a tiny GPT twice on the CPU (baseline "GPU" and target
"NPU" with one injected fault) and writes a scenario-layout case folder to diagnose.

``import precdx.demo`` does not import torch; ``run_demo`` does, when called.
"""
from __future__ import annotations

from pathlib import Path

from precdx.demo.catalogue import DEFAULT_FAULT, FAULTS, Fault

__all__ = ["DEFAULT_FAULT", "FAULTS", "Fault", "run_demo"]


def run_demo(fault: str = DEFAULT_FAULT, out_dir: Path | str = "precdx-demo", steps: int = 40,
             seed: int = 1234) -> Path:
    """Run the baseline and the faulty target and write the case folder; returns its path."""
    from precdx.demo.lab import run_case
    return run_case(fault, Path(out_dir), steps=steps, seed=seed)
