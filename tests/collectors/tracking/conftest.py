"""Helpers for the tracking-tool tests: real TensorBoard event files written with
torch.utils.tensorboard.SummaryWriter, and curve shapes for baseline/target pairs."""
from __future__ import annotations

import math
import random
from pathlib import Path

import pytest

from precdx.errors import Warnings
from precdx.pipeline import collect, discover

pytest.importorskip("tensorboard", reason="tensorboard (extra 'tracking') is needed to write and read event files")


def curve(i: int, drift: float = 0.0, seed_noise: float = 0.0) -> float:
    """A smooth decaying training loss, optionally drifting upward linearly."""
    return 2.0 + 8.0 * math.exp(-i / 60) + seed_noise + drift * i


def write_tb(folder: Path, tags: dict[str, callable], steps: range, extra: dict[str, callable] | None = None) -> Path:
    """One TensorBoard run folder: each tag's value at each step from its function."""
    from torch.utils.tensorboard import SummaryWriter

    folder.mkdir(parents=True, exist_ok=True)
    w = SummaryWriter(str(folder))
    for i in steps:
        for tag, fn in tags.items():
            w.add_scalar(tag, fn(i), i)
        for tag, fn in (extra or {}).items():
            w.add_scalar(tag, fn(i), i * 32)  # x-axis in samples, not steps
    w.close()
    return folder


def megatron_tags(drift: float = 0.0, gn_bump: float = 0.0, seed: int = 0) -> dict[str, callable]:
    rnd = random.Random(seed)
    noise = {i: rnd.gauss(0, 0.005) for i in range(0, 10_000)}
    return {
        "lm loss": lambda i: curve(i, drift, noise[i]),
        "grad-norm": lambda i: 1.0 + gn_bump + 0.01 * noise[i],
        "learning-rate": lambda i: 1e-4,
        "loss-scale": lambda i: 65536.0,
    }


def facts_of(case_dir: Path | None = None, **runs):
    """(FactSet, Warnings) of a case folder or of runs given one by one."""
    w = Warnings()
    case = discover(case_dir, warnings=w, **runs) if case_dir else discover(warnings=w, **runs)
    return collect(case, w), w


def pick(facts, ftype: str, **match):
    found = [f for f in facts if f.type == ftype and all(getattr(f, k) == v for k, v in match.items())]
    assert len(found) == 1, f"expected one {ftype} {match}, got {len(found)}: {found}"
    return found[0]
