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


class Runs:
    """A float column stored run-length encoded: `values[k]` holds from index `ends[k-1]` (0 for
    k = 0) up to `ends[k]`. Optional per-line fields (lr, loss scale, grad norm of a steady run,
    skip and NaN counters, non-finite flags) are constant over long stretches, so a run of
    millions of points costs a few runs instead of 8 bytes a point. Lossless: equal values (NaN
    equal to NaN, 0.0 distinct from -0.0) merge, nothing else."""

    __slots__ = ("values", "ends")

    def __init__(self, values: np.ndarray | None = None, ends: np.ndarray | None = None) -> None:
        self.values = values if values is not None else np.zeros(0)
        self.ends = ends if ends is not None else np.zeros(0, dtype=np.int64)

    @classmethod
    def of(cls, dense: np.ndarray) -> "Runs":
        dense = np.asarray(dense, dtype=np.float64)
        if dense.size == 0:
            return cls()
        bits = dense.view(np.int64)
        nan = np.isnan(dense)
        change = (bits[1:] != bits[:-1]) & ~(nan[1:] & nan[:-1])
        ends = np.append(np.flatnonzero(change) + 1, dense.size).astype(np.int64)
        return cls(dense[ends - 1].copy(), ends)

    @property
    def size(self) -> int:
        return int(self.ends[-1]) if self.ends.size else 0

    def dense(self) -> np.ndarray:
        if self.values.size == 1:
            return np.full(self.size, self.values[0])
        return np.repeat(self.values, np.diff(self.ends, prepend=0))

    def any_present(self) -> bool:
        """Some point is not NaN."""
        return bool(np.any(~np.isnan(self.values)))


class _RunsBuilder:
    """Append side of `Runs` (typed arrays, no per-point objects)."""

    __slots__ = ("values", "ends", "n", "last")

    def __init__(self) -> None:
        self.values = array("d")
        self.ends = array("q")
        self.n = 0
        self.last: float | None = None

    def append(self, v: float) -> None:
        last = self.last
        if last is not None and (v == last and (v != 0.0 or math.copysign(1.0, v) == math.copysign(1.0, last))
                                 or (v != v and last != last)):
            self.n += 1
            self.ends[-1] = self.n
            return
        self.n += 1
        self.values.append(v)
        self.ends.append(self.n)
        self.last = v

    def runs(self) -> Runs:
        return Runs(np.array(self.values, dtype=np.float64), np.array(self.ends, dtype=np.int64))


class _Columns:
    """Append-only typed columns for one framework's train records: step and loss as dense typed
    arrays (16 bytes a point), every other field run-length encoded."""

    def __init__(self) -> None:
        self.step = array("q")
        self.loss = array("d")
        self.loss_bad = _RunsBuilder()
        self.gn = _RunsBuilder()
        self.gn_bad = _RunsBuilder()
        self.lr = _RunsBuilder()
        self.scale = _RunsBuilder()
        self.skipped = _RunsBuilder()
        self.nan_iters = _RunsBuilder()
        self.inferred = 0
        self.with_loss = 0
        self.cumulative = False
        self.increasing = True  # every step above the one before: no restart, no duplicate

    def add(self, rec: Record, ordinal: int) -> None:
        step = rec.step
        if step is None:
            step = rec.step_hint if rec.step_hint is not None else ordinal
            self.inferred += 1
        step = int(float(step))  # as float64 -> int64 (truncation toward zero)
        if self.step and step <= self.step[-1]:
            self.increasing = False
        self.step.append(step)
        loss = rec.loss
        if loss is None:
            self.loss.append(_NAN)
            self.loss_bad.append(1.0 if rec.loss_missing else 0.0)
        else:
            self.with_loss += 1
            self.loss.append(loss)
            self.loss_bad.append(0.0 if math.isfinite(loss) else 1.0)
        gn = rec.grad_norm
        self.gn.append(_NAN if gn is None else float(gn))
        self.gn_bad.append(1.0 if gn is not None and not math.isfinite(gn) else 0.0)
        self.lr.append(_NAN if rec.lr is None else float(rec.lr))
        self.scale.append(_NAN if rec.loss_scale is None else float(rec.loss_scale))
        self.skipped.append(_NAN if rec.skipped is None else float(rec.skipped))
        self.nan_iters.append(_NAN if rec.nan_iters is None else float(rec.nan_iters))
        self.cumulative = self.cumulative or rec.skipped_cumulative

    def __len__(self) -> int:
        return len(self.step)


_RUN_FIELDS = ("loss_bad", "grad_norm", "gn_bad", "lr", "loss_scale", "skipped", "nan_iters")
_BOOL_FIELDS = ("loss_bad", "gn_bad")


@dataclass
class StepSeries:
    """The canonical per-run curve. Arrays are aligned by index and sorted by step.

    loss: NaN where the loss was non-finite or absent; `loss_bad` marks non-finite (printed
    NaN/Inf, or a key the framework drops for non-finite values). grad_norm/lr/loss_scale are NaN
    where not printed; `gn_bad` marks a printed non-finite grad norm. skipped/nan_iters: per line
    (NaN = not printed).

    Storage: `steps` (int64) and `loss` (float64) are dense arrays; the other columns are kept
    run-length encoded in `runs` (see `Runs`) and each attribute access returns a fresh dense
    array (the same values, bit for bit).
    """

    run: str
    role: str
    framework: str
    steps: np.ndarray
    loss: np.ndarray
    runs: dict[str, Runs]
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

    def _dense(self, name: str) -> np.ndarray:
        r = self.runs[name]
        d = r.dense() if r.size == self.steps.size else np.full(self.steps.size, np.nan)
        return d.astype(bool) if name in _BOOL_FIELDS else d

    loss_bad = property(lambda self: self._dense("loss_bad"))
    grad_norm = property(lambda self: self._dense("grad_norm"))
    gn_bad = property(lambda self: self._dense("gn_bad"))
    lr = property(lambda self: self._dense("lr"))
    loss_scale = property(lambda self: self._dense("loss_scale"))
    skipped = property(lambda self: self._dense("skipped"))
    nan_iters = property(lambda self: self._dense("nan_iters"))

    def __len__(self) -> int:
        return int(self.steps.size)

    @property
    def log_interval(self) -> int | None:
        if self.steps.size < 2:
            return None
        return int(np.median(np.diff(self.steps)))

    @property
    def has_grad_norm(self) -> bool:
        return self.runs["grad_norm"].any_present() or bool(np.any(self.runs["gn_bad"].values != 0))

    @property
    def has_loss_scale(self) -> bool:
        return self.runs["loss_scale"].any_present()

    @property
    def nonfinite(self) -> np.ndarray:
        """Per point: the loss or the grad norm was non-finite (HF filters NaN out of its loss)."""
        return self.loss_bad | self.gn_bad


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
        steps = np.array(c.step, dtype=np.int64)
        loss = np.array(c.loss, dtype=np.float64)
        runs = {"loss_bad": c.loss_bad.runs(), "grad_norm": c.gn.runs(), "gn_bad": c.gn_bad.runs(),
                "lr": c.lr.runs(), "loss_scale": c.scale.runs(), "skipped": c.skipped.runs(),
                "nan_iters": c.nan_iters.runs()}
        restarts = duplicates = 0
        if not c.increasing:  # restarts or re-logged steps: only then index through a copy
            d = np.diff(steps)
            restarts, duplicates = int(np.sum(d < 0)), int(np.sum(d == 0))
            del d
            # Last occurrence of each step wins: reverse, take first unique, restore order.
            rev = steps[::-1]
            _, first_idx = np.unique(rev, return_index=True)
            keep = (steps.size - 1 - first_idx)
            keep.sort()
            keep = keep[np.argsort(steps[keep], kind="stable")]
            steps, loss = steps[keep], loss[keep]
            runs = {k: Runs.of(r.dense()[keep]) for k, r in runs.items()}
        if c.cumulative and steps.size:
            skipped = runs["skipped"].dense()
            known = ~np.isnan(skipped)
            vals = skipped[known]
            diffs = np.diff(np.concatenate([[0.0], vals]))
            skipped[known] = np.maximum(diffs, 0)  # a restart resets the running total
            runs["skipped"] = Runs.of(skipped)
        # A DeepSpeed engine line without loss can sit beside the client's loss lines: borrow
        # its skip counts when the curve itself has none.
        if not runs["skipped"].any_present() and "deepspeed" in self._cols and framework != "deepspeed":
            aux = self.build("deepspeed")
            if aux is not None and aux.steps.size:
                lookup = dict(zip(aux.steps.tolist(), aux.skipped.tolist()))
                runs["skipped"] = Runs.of(np.array([lookup.get(s, _NAN) for s in steps.tolist()],
                                                   dtype=np.float64))
        if framework in WINDOWED and steps.size and np.any(runs["skipped"].values >= 1):
            # Megatron averages only non-skipped iterations: a window whose every iteration was
            # skipped has no loss (it prints 0.0 or drops the key); that is a skip, not a NaN.
            # (A skip count >= the window is >= 1: without one, nothing changes.)
            skipped = runs["skipped"].dense()
            gap = np.diff(steps, prepend=steps[0] - (int(np.median(np.diff(steps))) if steps.size > 1 else 1))
            all_skipped = ~np.isnan(skipped) & (skipped >= np.maximum(gap, 1))
            loss = np.where(all_skipped, np.nan, loss)
            loss_bad = runs["loss_bad"].dense().astype(bool) & ~all_skipped
            runs["loss_bad"] = Runs.of(loss_bad.astype(np.float64))
        return StepSeries(
            run=self.run, role=self.role, framework=framework, steps=steps, loss=loss, runs=runs,
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
