"""One canonical step series per run, built from the records of its log file(s).

Columns are compact arrays filled while streaming (a 1 GB log never lives in memory as text or
as record objects). Semantics kept: the last occurrence of a step wins (a restart re-logs steps),
steps going backwards count as restarts; DeepSpeed's cumulative `skipped` becomes per-line
counts; a loss key a framework drops for non-finite values counts as non-finite; HF stdout dicts
without a step use the tqdm counter, else their ordinal.
"""
from __future__ import annotations

import math
from array import array
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from engine.collectors.logs.formats import WINDOWED
from engine.collectors.logs.model import Event, Record

MAX_EVENTS = 10_000  # events kept verbatim per run; counts stay exact beyond that
MAX_STEP = 2 ** 53   # steps are counters; NaN, Inf or anything beyond exact float range is garbage
_NAN = math.nan


class _Columns:
    """Append-only typed columns for one framework's train records."""

    def __init__(self) -> None:
        self.step = array("d")
        self.loss = array("d")
        self.loss_bad = array("b")
        self.gn = array("d")
        self.gn_bad = array("b")
        self.lr = array("d")
        self.scale = array("d")
        self.skipped = array("d")
        self.nan_iters = array("d")
        self.inferred = 0
        self.with_loss = 0
        self.cumulative = False

    def add(self, rec: Record, ordinal: int) -> None:
        step = rec.step
        if step is None:
            step = rec.step_hint if rec.step_hint is not None else ordinal
            self.inferred += 1
        self.step.append(float(step))
        loss = rec.loss
        if loss is None:
            self.loss.append(_NAN)
            self.loss_bad.append(1 if rec.loss_missing else 0)
        else:
            self.with_loss += 1
            self.loss.append(loss)
            self.loss_bad.append(0 if math.isfinite(loss) else 1)
        gn = rec.grad_norm
        self.gn.append(_NAN if gn is None else gn)
        self.gn_bad.append(1 if gn is not None and not math.isfinite(gn) else 0)
        self.lr.append(_NAN if rec.lr is None else rec.lr)
        self.scale.append(_NAN if rec.loss_scale is None else rec.loss_scale)
        self.skipped.append(_NAN if rec.skipped is None else rec.skipped)
        self.nan_iters.append(_NAN if rec.nan_iters is None else rec.nan_iters)
        self.cumulative = self.cumulative or rec.skipped_cumulative

    def __len__(self) -> int:
        return len(self.step)


@dataclass
class StepSeries:
    """The canonical per-run curve. Arrays are aligned by index and sorted by step.

    loss: NaN where the loss was non-finite or absent; `loss_bad` marks non-finite (printed
    NaN/Inf, or a key the framework drops for non-finite values). grad_norm/lr/loss_scale are NaN
    where not printed; `gn_bad` marks a printed non-finite grad norm. skipped/nan_iters: per line
    (NaN = not printed).
    """

    run: str
    role: str
    framework: str
    steps: np.ndarray
    loss: np.ndarray
    loss_bad: np.ndarray
    grad_norm: np.ndarray
    gn_bad: np.ndarray
    lr: np.ndarray
    loss_scale: np.ndarray
    skipped: np.ndarray
    nan_iters: np.ndarray
    windowed: bool = False
    step_inferred: bool = False
    restarts: int = 0
    duplicate_lines: int = 0
    eval_records: int = 0
    events: list[Event] = field(default_factory=list)
    event_counts: dict[str, int] = field(default_factory=dict)
    sources: list[str] = field(default_factory=list)
    group: str | None = None
    hosts: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return int(self.steps.size)

    @property
    def log_interval(self) -> int | None:
        if self.steps.size < 2:
            return None
        return int(np.median(np.diff(self.steps)))

    @property
    def has_grad_norm(self) -> bool:
        return bool(np.any(~np.isnan(self.grad_norm) | self.gn_bad.astype(bool)))

    @property
    def has_loss_scale(self) -> bool:
        return bool(np.any(~np.isnan(self.loss_scale)))

    @property
    def nonfinite(self) -> np.ndarray:
        """Per point: the loss or the grad norm was non-finite (HF filters NaN out of its loss)."""
        return self.loss_bad.astype(bool) | self.gn_bad.astype(bool)


class SeriesBuilder:
    """Feed records and events of one run (one or more files), then `build()`."""

    def __init__(self, run: str, role: str) -> None:
        self.run, self.role = run, role
        self._cols: dict[str, _Columns] = {}
        self._ordinal: dict[str, int] = {}
        self.evals = 0
        self.events: list[Event] = []
        self.event_counts: dict[str, int] = {}
        self.sources: list[str] = []
        self._last_step: int | None = None
        self._rerun_step: int | None = None
        self.bad_steps = 0  # train records dropped for an impossible step number

    def add(self, item: Record | Event) -> None:
        if isinstance(item, Event):
            if item.kind == "rerun_unexpected_result" and item.step is not None:
                self._rerun_step = item.step
            if item.step is None and item.kind.startswith("rerun_") and self._rerun_step is not None:
                item.step = self._rerun_step  # verdict lines belong to the iteration being re-run
            if item.step is None and item.kind != "checkpoint_load":
                item.step = self._last_step  # the step logged just before the line
            self.event_counts[item.kind] = self.event_counts.get(item.kind, 0) + 1
            if len(self.events) < MAX_EVENTS:
                self.events.append(item)
            return
        if item.kind != "train":
            self.evals += 1
            return
        if item.step is not None and not _sane_step(item.step):
            self.bad_steps += 1
            return
        if item.step_hint is not None and not _sane_step(item.step_hint):
            item.step_hint = None
        cols = self._cols.get(item.framework)
        if cols is None:
            cols = self._cols[item.framework] = _Columns()
        n = self._ordinal.get(item.framework, 0) + 1
        self._ordinal[item.framework] = n
        cols.add(item, n)
        self._last_step = int(cols.step[-1])

    def frameworks(self) -> dict[str, int]:
        return {k: len(v) for k, v in self._cols.items()}

    def primary(self) -> str | None:
        """The framework whose records carry the curve: most records with a loss, then most records."""
        if not self._cols:
            return None
        return max(self._cols, key=lambda k: (self._cols[k].with_loss > 0, len(self._cols[k]),
                                              k == "hf_trainer_state"))

    def build(self, framework: str | None = None) -> StepSeries | None:
        framework = framework or self.primary()
        if framework is None:
            return None
        c = self._cols[framework]
        steps = np.frombuffer(c.step, dtype=np.float64).astype(np.int64) if len(c) else np.zeros(0, np.int64)
        cols = {name: np.frombuffer(getattr(c, name), dtype=np.float64 if getattr(c, name).typecode == "d"
                                    else np.int8).copy() if len(c) else np.zeros(0)
                for name in ("loss", "loss_bad", "gn", "gn_bad", "lr", "scale", "skipped", "nan_iters")}
        restarts = int(np.sum(np.diff(steps) < 0)) if steps.size > 1 else 0
        duplicates = int(np.sum(np.diff(steps) == 0)) if steps.size > 1 else 0
        # Last occurrence of each step wins: reverse, take first unique, restore order.
        rev = steps[::-1]
        _, first_idx = np.unique(rev, return_index=True)
        keep = (steps.size - 1 - first_idx)
        keep.sort()
        keep = keep[np.argsort(steps[keep], kind="stable")]
        skipped = cols["skipped"][keep]
        if c.cumulative and skipped.size:
            known = ~np.isnan(skipped)
            vals = skipped[known]
            diffs = np.diff(np.concatenate([[0.0], vals]))
            skipped = skipped.copy()
            skipped[known] = np.maximum(diffs, 0)  # a restart resets the running total
        # A DeepSpeed engine line without loss can sit beside the client's loss lines: borrow
        # its skip counts when the curve itself has none.
        if np.all(np.isnan(skipped)) and "deepspeed" in self._cols and framework != "deepspeed":
            aux = self.build("deepspeed")
            if aux is not None and aux.steps.size:
                lookup = dict(zip(aux.steps.tolist(), aux.skipped.tolist()))
                skipped = np.array([lookup.get(s, _NAN) for s in steps[keep].tolist()], dtype=np.float64)
        steps_k, loss, loss_bad = steps[keep], cols["loss"][keep], cols["loss_bad"][keep].astype(bool)
        if framework in WINDOWED and steps_k.size:
            # Megatron averages only non-skipped iterations: a window whose every iteration was
            # skipped has no loss (it prints 0.0 or drops the key); that is a skip, not a NaN.
            gap = np.diff(steps_k, prepend=steps_k[0] - (int(np.median(np.diff(steps_k))) if steps_k.size > 1 else 1))
            all_skipped = ~np.isnan(skipped) & (skipped >= np.maximum(gap, 1))
            loss = np.where(all_skipped, np.nan, loss)
            loss_bad = loss_bad & ~all_skipped
        return StepSeries(
            run=self.run, role=self.role, framework=framework, steps=steps_k,
            loss=loss, loss_bad=loss_bad,
            grad_norm=cols["gn"][keep], gn_bad=cols["gn_bad"][keep].astype(bool), lr=cols["lr"][keep],
            loss_scale=cols["scale"][keep], skipped=skipped, nan_iters=cols["nan_iters"][keep],
            windowed=framework in WINDOWED, step_inferred=c.inferred > 0, restarts=restarts,
            duplicate_lines=duplicates, eval_records=self.evals, events=list(self.events),
            event_counts=dict(self.event_counts), sources=list(self.sources))


def _sane_step(step: float | int) -> bool:
    try:
        return math.isfinite(step) and abs(step) <= MAX_STEP
    except OverflowError:  # an int beyond float range
        return False


def series_from_records(items: list[Record | Event], run: str = "run", role: str = "target") -> StepSeries | None:
    """Convenience for tests and small inputs."""
    b = SeriesBuilder(run, role)
    for it in items:
        b.add(it)
    return b.build()


def source_text(paths: list[Path | str]) -> str:
    return ",".join(str(p) for p in paths)
