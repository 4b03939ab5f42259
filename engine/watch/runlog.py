"""The watched run's own log: one line per logged step in Megatron-LM's ``training_log``
layout (a format the logs collector reads), written as the run goes so the case folder holds
the curve up to the last step even when the job dies."""
from __future__ import annotations

import math
import time
from pathlib import Path
from typing import TextIO

from precdx.watch.checks import Point

DIGITS = 9  # enough to tell two float32 values apart


def _num(v: float) -> str:
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return f"{v:.{DIGITS - 1}E}"


def format_line(p: Point, total: int, framework: str) -> str:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    parts = [f" [{stamp}] iteration {p.step:8d}/{total:8d} |"]
    if p.lr is not None:
        parts.append(f" learning rate: {_num(p.lr)} |")
    skipped = int(p.skipped or (p.loss_scale is not None and p.grad_norm is not None
                                and not math.isfinite(p.grad_norm)))
    # an iteration skipped for overflow prints neither loss nor grad norm (as Megatron does):
    # a skip, not a NaN
    if not skipped:
        parts.append(f" lm loss: {_num(p.loss)} |")
    if p.loss_scale is not None:
        parts.append(f" loss scale: {_num(p.loss_scale)} |")
    if p.grad_norm is not None and not skipped:
        parts.append(f" grad norm: {_num(p.grad_norm)} |")
    nan = int(not skipped and any(v is not None and math.isnan(v) for v in (p.loss, p.grad_norm)))
    parts.append(f" number of skipped iterations: {skipped:3d} |")
    parts.append(f" number of nan iterations: {nan:3d} |")
    return "".join(parts)


class RunLog:
    """Appends logged steps to ``path`` (line-buffered: a crash loses at most the current line)."""

    def __init__(self, path: Path, framework: str, total: int | None) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.framework = framework
        self.total = total or 0
        self._fh: TextIO | None = open(path, "w", encoding="utf-8", buffering=1)
        self._fh.write(f"precdx watch: {framework} training run, logged steps in Megatron-LM's "
                       "training_log layout\n")
        self._fh.write("training ...\n")

    def write(self, p: Point) -> None:
        if self._fh is None or (p.loss is None and not p.skipped):
            return
        self._fh.write(format_line(p, self.total, self.framework) + "\n")

    def note(self, text: str) -> None:
        if self._fh is not None:
            self._fh.write(text.rstrip("\n") + "\n")

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
