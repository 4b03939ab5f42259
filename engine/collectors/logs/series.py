"""One canonical step series per run, built from the records of its log file(s).

Columns are compact arrays filled while streaming (a 1 GB log never lives in memory as text or
as record objects). Semantics kept: the last occurrence of a step wins (a restart re-logs steps),
steps going backwards count as restarts; DeepSpeed's cumulative `skipped` becomes per-line
counts; a loss key a framework drops for non-finite values counts as non-finite; HF stdout dicts
without a step use the tqdm counter, else their ordinal.

Bounded memory (issue 9). Up to `max_points()` logged points per run (`MAX_POINTS`, overridable
by the env var `PRECDX_LOG_MAX_POINTS`) everything is kept point by point and every fact is exact,
as before. Beyond it the run's points are folded into exact per-window aggregates (`Windows`):
each window holds k consecutive logged points (k starts at FOLD = 8 and doubles whenever the
windows outnumber threshold / 8, a window costing ~8x a point) with its first and last step, count, loss sum/finite count/min/max, non-finite count,
NaN-iteration weight, skipped sum, grad-norm sum/count/max/non-finite count, last lr and last loss
scale; at most `threshold` points stay buffered, so peak memory stays O(threshold) whatever the
log length (until k itself exceeds the threshold, i.e. beyond threshold^2 / 8 points). The folded series exposes one
point per window (step = last step of the window, loss/grad norm = window mean over finite
values, NaN when a value in it was non-finite; skipped and nan_iters = window sums; lr and loss
scale = last value), so all comparison code runs unchanged on it. Above the threshold:
  exact   n_points, first/last step of a run, min loss, total NaN weight (nan_count), skipped_count,
          restarts/duplicate counts, per-window loss and grad-norm means (computed from sums),
          first/last loss scale and their min/max, the log interval of a uniformly logged run;
  window  first/last loss (window means), first_nan_step, first_divergence_step / first step over a band, spike steps and the
          step of anything located in the series resolve to the window (its last step);
  approx  spike counts (spikes are looked for among window means, so isolated one-step spikes
          are smoothed away), relative-error means/percentiles/drift and ratio stats (computed
          over window means, not per step: equal to within the curve's variation inside a
          window; the tests hold the mean and drift to 5% on a smooth diverging curve), the
          final error (last 10 windows, not last 10 steps) and the max error (of window means,
          so <= the per-step max), max NaN/skips within 50
          steps (windows count as a whole), loss-scale increase/decrease counts. A restart that
          re-logs steps already folded drops the windows reaching those steps (points of a
          straddling window before the restart step are lost with it, so n_points then counts fewer); a DeepSpeed client curve
          borrowing engine skip counts borrows them only at window steps.
"""
from __future__ import annotations

import bisect

import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from precdx.collectors.logs import native
from precdx.collectors.logs.formats import WINDOWED
from precdx.collectors.logs.model import Event, Record, Rows

MAX_EVENTS = 10_000  # events kept verbatim per run; counts stay exact beyond that
# Per-iteration settings some formats print besides the metrics (first/last value and how often
# they changed are kept, not a column): compared across runs by lr_compare.
TRACKED = ("global_batch_size", "consumed_samples", "consumed_tokens", "total_steps", "epoch")
MAX_PENDING = 10_000  # step-less records held until a progress-bar counter dates them
# Events looked up among the queued records with numpy before their lines are made a list for
# bisect (which costs a pass over them, and pays from about this many lookups on).
_LOOKUPS = 64
MAX_STEP = 2 ** 53   # steps are counters; NaN, Inf or anything beyond exact float range is garbage
_NAN = math.nan
MAX_POINTS = 200_000  # points kept per run before folding into windows (see module docstring)
FOLD = 8  # first window size; windows kept <= threshold / FOLD (a window costs ~8x a point)


def max_points() -> int:
    """The folding threshold: env `PRECDX_LOG_MAX_POINTS` when set to an integer >= 16."""
    raw = os.environ.get("PRECDX_LOG_MAX_POINTS")
    try:
        return max(16, int(raw)) if raw else MAX_POINTS
    except ValueError:
        return MAX_POINTS


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
        ends = np.append(_run_starts(dense), dense.size).astype(np.int64)
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


def _run_starts(v: np.ndarray) -> np.ndarray:
    """Where a run of equal values starts in `v` (float64), its first one left out: NaN equal to
    NaN, 0.0 distinct from -0.0."""
    bits = v.view(np.int64)
    nan = np.isnan(v)
    return np.flatnonzero((bits[1:] != bits[:-1]) & ~(nan[1:] & nan[:-1])) + 1


_AGG_SUM = ("count", "loss_sum", "loss_n", "loss_bad", "nan_w", "skipped_sum", "skipped_n",
            "gn_sum", "gn_n", "gn_bad")
_AGG_MIN = ("loss_min",)
_AGG_MAX = ("loss_max", "gn_max")
_AGG_FIRST = ("first_step",)
_AGG_LAST = ("last_step", "lr", "loss_scale")


class Windows:
    """Exact per-window aggregates of consecutive logged points (see the module docstring)."""

    FIELDS = _AGG_FIRST + _AGG_LAST + _AGG_SUM + _AGG_MIN + _AGG_MAX

    def __init__(self) -> None:
        self.k = 1
        self.a: dict[str, np.ndarray] = {f: np.zeros(0, dtype=np.int64 if f.endswith("_step") else np.float64)
                                         for f in self.FIELDS}

    def __len__(self) -> int:
        return int(self.a["count"].size)

    def drop_from(self, step: int) -> None:
        """Forget the windows reaching `step` or beyond (a restart re-logs them)."""
        keep = int(np.searchsorted(self.a["last_step"], step, side="left"))
        if keep < len(self):
            self.a = {f: v[:keep] for f, v in self.a.items()}

    def append(self, steps: np.ndarray, loss: np.ndarray, cols: dict[str, np.ndarray], k: int) -> None:
        """Fold aligned point arrays into windows of `k` points (the last one may be shorter):
        in one compiled pass when the kernels are there, else with numpy (the same values)."""
        n = steps.size
        if n == 0:
            return
        kern = native.kernels()
        new = native.fold(kern, steps, loss, cols, k) if kern is not None else self._fold(steps, loss, cols, k)
        self.a = {f: np.concatenate([self.a[f], new[f]]) for f in self.FIELDS}

    @staticmethod
    def _fold(steps: np.ndarray, loss: np.ndarray, cols: dict[str, np.ndarray], k: int) -> dict[str, np.ndarray]:
        """`append`'s windows with numpy (the reference the compiled fold equals)."""
        n = steps.size
        starts = np.arange(0, n, k)
        lasts = np.append(starts[1:], n) - 1
        fl = np.isfinite(loss)
        gn = cols["grad_norm"]
        fg = np.isfinite(gn)
        sk = cols["skipped"]
        known = ~np.isnan(sk)
        bad = cols["loss_bad"] != 0
        nan_w = np.maximum(np.nan_to_num(cols["nan_iters"], nan=0.0), (bad | (cols["gn_bad"] != 0)).astype(float))
        add = lambda v: np.add.reduceat(v, starts)  # noqa: E731
        return {
            "first_step": steps[starts], "last_step": steps[lasts],
            "count": np.diff(np.append(starts, n)).astype(np.float64),
            "loss_sum": add(np.where(fl, loss, 0.0)), "loss_n": add(fl.astype(float)),
            "loss_min": np.minimum.reduceat(np.where(fl, loss, np.inf), starts),
            "loss_max": np.maximum.reduceat(np.where(fl, loss, -np.inf), starts),
            "loss_bad": add(bad.astype(float)), "nan_w": add(nan_w),
            "skipped_sum": add(np.where(known, sk, 0.0)), "skipped_n": add(known.astype(float)),
            "gn_sum": add(np.where(fg, gn, 0.0)), "gn_n": add(fg.astype(float)),
            "gn_max": np.maximum.reduceat(np.where(fg, gn, -np.inf), starts),
            "gn_bad": add((cols["gn_bad"] != 0).astype(float)),
            "lr": cols["lr"][lasts], "loss_scale": cols["loss_scale"][lasts],
        }

    def halve(self) -> None:
        """Merge neighbouring windows pairwise (k doubles); an odd last window stays alone."""
        n = len(self)
        starts = np.arange(0, n, 2)
        lasts = np.minimum(starts + 1, n - 1)
        a = self.a
        out = {f: a[f][starts] for f in _AGG_FIRST}
        out.update({f: a[f][lasts] for f in _AGG_LAST})
        out.update({f: np.add.reduceat(a[f], starts) for f in _AGG_SUM})
        out.update({f: np.minimum.reduceat(a[f], starts) for f in _AGG_MIN})
        out.update({f: np.maximum.reduceat(a[f], starts) for f in _AGG_MAX})
        self.a = out
        self.k *= 2

    def series(self) -> tuple[np.ndarray, np.ndarray, dict[str, Runs]]:
        """One point per window: (steps, loss, run-length columns) in StepSeries layout."""
        a = self.a
        with np.errstate(invalid="ignore", divide="ignore"):
            loss = np.where((a["loss_bad"] == 0) & (a["loss_n"] > 0), a["loss_sum"] / a["loss_n"], np.nan)
            gn = np.where((a["gn_bad"] == 0) & (a["gn_n"] > 0), a["gn_sum"] / a["gn_n"], np.nan)
        runs = {"loss_bad": Runs.of((a["loss_bad"] > 0).astype(float)), "grad_norm": Runs.of(gn),
                "gn_bad": Runs.of((a["gn_bad"] > 0).astype(float)), "lr": Runs.of(a["lr"]),
                "loss_scale": Runs.of(a["loss_scale"]),
                "skipped": Runs.of(np.where(a["skipped_n"] > 0, a["skipped_sum"], np.nan)),
                "nan_iters": Runs.of(a["nan_w"])}
        return a["last_step"].copy(), loss, runs


_BUFFERED = ("loss_bad", "grad_norm", "gn_bad", "lr", "loss_scale", "skipped", "nan_iters")
_ADD_CHUNK = 4096  # records added one by one go into the buffer this many at a time


class _Columns:
    """One framework's train records, buffered as dense typed columns (in line order, at most
    `limit` + 1 points: 72 bytes a point, in arrays that grow by doubling) until they are folded
    into windows or built into a series (the optional columns then run-length encoded)."""

    def __init__(self, framework: str = "", limit: int | None = None) -> None:
        self.framework = framework
        self.limit = limit if limit is not None else max_points()
        self.max_windows = max(8, self.limit // FOLD)
        self.windows: Windows | None = None  # set once the run outgrew `limit` points
        self.total = 0            # points added (folded or not)
        self.last_step: int | None = None
        self.restarts = 0
        self.duplicates = 0
        self._cum_last = 0.0      # last cumulative skip total seen (folded mode)
        self._prev_step: int | None = None  # last step folded (folded mode)
        self._buf: dict[str, np.ndarray] = {}  # "step", "loss" and _BUFFERED, room for _cap points
        self._cap = 0
        self._added: list[tuple] = []  # records added one by one, not yet in the buffer
        self._n = 0               # points buffered (those in `_added` included)
        self.inferred = 0
        self.with_loss = 0
        self.cumulative = False
        self.increasing = True  # every step above the one before: no restart, no duplicate
        self.tracked: dict[str, list] = {}  # extra name -> [first step, first, last step, last, changes]

    def add(self, rec: Record, ordinal: int) -> None:
        step = rec.step
        if step is None:
            step = rec.step_hint if rec.step_hint is not None else ordinal
            self.inferred += 1
        step = int(float(step))  # as float64 -> int64 (truncation toward zero)
        if rec.extra:
            for name in TRACKED:
                v = rec.extra.get(name)
                if v is None or not math.isfinite(v):
                    continue
                t = self.tracked.get(name)
                if t is None:
                    self.tracked[name] = [step, v, step, v, 0]
                else:
                    if v != t[3]:
                        t[4] += 1
                    t[2], t[3] = step, v
        prev = self.last_step  # in stream order (a fold re-sorts the buffer)
        if prev is not None and step <= prev:
            self.increasing = False
            if step < prev:
                self.restarts += 1
            else:
                self.duplicates += 1
        self.total += 1
        self.last_step = step
        loss = rec.loss
        if loss is None:
            loss, loss_bad = _NAN, 1.0 if rec.loss_missing else 0.0
        else:
            self.with_loss += 1
            loss_bad = 0.0 if math.isfinite(loss) else 1.0
        gn = rec.grad_norm
        self._added.append((step, loss, loss_bad, _NAN if gn is None else float(gn),
                            1.0 if gn is not None and not math.isfinite(gn) else 0.0,
                            _NAN if rec.lr is None else float(rec.lr),
                            _NAN if rec.loss_scale is None else float(rec.loss_scale),
                            _NAN if rec.skipped is None else float(rec.skipped),
                            _NAN if rec.nan_iters is None else float(rec.nan_iters)))
        self.cumulative = self.cumulative or rec.skipped_cumulative
        self._n += 1
        if len(self._added) >= _ADD_CHUNK:
            self._gather()
        if self._n > self.limit:
            self.fold()

    def _gather(self) -> None:
        """The records added one by one go into the buffer."""
        if not self._added:
            return
        a = np.array(self._added, dtype=np.float64)
        steps = np.array([r[0] for r in self._added], dtype=np.int64)  # (exact beyond 2^53 too)
        self._added = []
        self._put(self._n - len(steps), steps, a[:, 1], {name: a[:, 2 + j] for j, name in enumerate(_BUFFERED)})

    def _put(self, at: int, steps: np.ndarray, loss: np.ndarray, cols: dict[str, np.ndarray]) -> None:
        """Points written into the buffer from point `at` on (it grows when short of room)."""
        end = at + steps.size
        if end > self._cap:
            cap = max(end, min(2 * self._cap, self.limit + 1), 256)
            grown = {"step": np.empty(cap, dtype=np.int64)}
            grown.update({k: np.empty(cap) for k in ("loss",) + _BUFFERED})
            for k, v in self._buf.items():
                grown[k][:at] = v[:at]
            self._buf, self._cap = grown, cap
        b = self._buf
        b["step"][at:end] = steps
        b["loss"][at:end] = loss
        for k in _BUFFERED:
            b[k][at:end] = cols[k]

    def extend(self, rows: Rows) -> None:
        """`add` of every record of `rows` in order, vectorised (same columns, counters, tracked
        settings and folds as adding them one by one)."""
        n = len(rows)
        if n == 0:
            return
        steps = np.trunc(rows.step).astype(np.int64)  # int(float(step)): truncation toward zero
        for name in TRACKED:
            v = rows.extra.get(name)
            if v is None:
                continue
            fin = np.isfinite(v)
            if not fin.any():
                continue
            vs, ss = v[fin], steps[fin]
            t = self.tracked.get(name)
            if t is None:
                t = self.tracked[name] = [int(ss[0]), float(vs[0]), int(ss[0]), float(vs[0]), 0]
                t[4] += int(np.count_nonzero(vs[1:] != vs[:-1]))
            else:
                t[4] += int(np.count_nonzero(vs != np.concatenate(([t[3]], vs[:-1]))))
            t[2], t[3] = int(ss[-1]), float(vs[-1])
        if rows.inferred is not None:
            self.inferred += int(np.count_nonzero(rows.inferred))
        d = np.diff(steps) if self.last_step is None else np.diff(steps, prepend=self.last_step)
        if d.size and not (d > 0).all():
            self.increasing = False
            self.restarts += int(np.count_nonzero(d < 0))
            self.duplicates += int(np.count_nonzero(d == 0))
        self.total += n
        self.last_step = int(steps[-1])
        has_loss = rows.has_loss
        self.with_loss += int(np.count_nonzero(has_loss))
        with np.errstate(invalid="ignore"):
            loss = np.where(has_loss, rows.loss, _NAN)
            loss_bad = np.where(has_loss, ~np.isfinite(rows.loss), rows.loss_missing).astype(np.float64)
            gn = np.where(rows.has_grad_norm, rows.grad_norm, _NAN)
            gn_bad = (rows.has_grad_norm & ~np.isfinite(rows.grad_norm)).astype(np.float64)
        self.cumulative = self.cumulative or rows.skipped_cumulative
        cols = {"loss_bad": loss_bad, "grad_norm": gn, "gn_bad": gn_bad, "lr": rows.lr,
                "loss_scale": rows.loss_scale, "skipped": rows.skipped, "nan_iters": rows.nan_iters}
        self._gather()
        i = 0
        while i < n:  # a fold happens as soon as the buffer outgrows the limit, as in `add`
            j = min(n, i + max(1, self.limit + 1 - self._n))
            self._put(self._n, steps[i:j], loss[i:j], {k: v[i:j] for k, v in cols.items()})
            self._n += j - i
            if self._n > self.limit:
                self.fold()
            i = j

    def __len__(self) -> int:
        return self.total if self.windows is not None else self._n

    @property
    def n_buffered(self) -> int:
        """Points held as points (not yet folded into windows)."""
        return self._n

    def _views(self) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        """The buffered points, as views of the buffer."""
        self._gather()
        n = self._n
        if not self._buf:
            return np.zeros(0, dtype=np.int64), np.zeros(0), {k: np.zeros(0) for k in _BUFFERED}
        b = self._buf
        return b["step"][:n], b["loss"][:n], {k: b[k][:n] for k in _BUFFERED}

    def buffered(self) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        """The buffered points as dense arrays of their own (steps, loss, other columns by
        StepSeries name); they stay buffered."""
        steps, loss, cols = self._views()
        return steps.copy(), loss.copy(), {k: v.copy() for k, v in cols.items()}

    def fold(self, final: bool = False) -> None:
        """Fold the buffered points into windows (all of them when `final`, else whole windows
        of k, the rest staying buffered), after the same normalisation `build` applies to a whole
        series (`normalise`: last occurrence wins, cumulative skips, all-skipped windows)."""
        if not self._n:
            return
        if self.windows is None:
            self.windows = Windows()
            self.windows.k = FOLD
        w = self.windows
        # (views of the buffer: what normalise changes in place is in the points folded away)
        steps, loss, cols = last_wins(*self._views())
        w.drop_from(int(steps[0]))
        m = steps.size if final else (steps.size // w.k) * w.k
        if m:
            h_steps, h_loss = steps[:m], loss[:m]
            h = {k: v[:m] for k, v in cols.items()}
            h_loss, self._cum_last = normalise(h_steps, h_loss, h, self.framework, self.cumulative,
                                               self._cum_last, self._prev_step)
            self._prev_step = int(h_steps[-1])
            w.append(h_steps, h_loss, h, w.k)
            while len(w) > self.max_windows:
                w.halve()
        self._n = 0
        if steps.size > m:  # to the head of the buffer, as logged (normalised when folded)
            self._put(0, steps[m:], loss[m:], {k: v[m:] for k, v in cols.items()})  # (overlaps: numpy copes)
            self._n = steps.size - m


def last_wins(steps: np.ndarray, loss: np.ndarray, cols: dict[str, np.ndarray]
              ) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """Points sorted by step with the last occurrence of each step kept (a restart re-logs
    steps): unchanged when the steps already increase."""
    if steps.size < 2 or (np.diff(steps) > 0).all():
        return steps, loss, cols
    rev = steps[::-1]
    _, first_idx = np.unique(rev, return_index=True)
    keep = steps.size - 1 - first_idx
    keep.sort()
    keep = keep[np.argsort(steps[keep], kind="stable")]
    return steps[keep], loss[keep], {k: v[keep] for k, v in cols.items()}


def normalise(steps: np.ndarray, loss: np.ndarray, cols: dict[str, np.ndarray], framework: str,
              cumulative: bool, cum_last: float = 0.0, prev_step: int | None = None,
              borrow=None) -> tuple[np.ndarray, float]:
    """The per-point adjustments both storage paths make (issue 15: one normalisation), on
    step-sorted unique points; `cols` is updated in place, the loss returned with the running
    skip total:
      - DeepSpeed's cumulative `skipped` becomes per-line counts (a restart resets the total),
        continuing from `cum_last`;
      - `borrow(steps)`, when given and the curve has no skip counts, supplies them (a DeepSpeed
        engine line beside the client's loss lines);
      - in windowed formats, a window whose every iteration was skipped has no loss (Megatron
        averages only non-skipped iterations and prints 0.0 or drops the key): that is a skip,
        not a NaN. The window of the first point reaches back to `prev_step` (else one median
        interval)."""
    sk = cols["skipped"]
    if cumulative and steps.size:
        known = ~np.isnan(sk)
        vals = sk[known]
        diffs = np.diff(np.concatenate([[cum_last], vals]))
        if vals.size:
            cum_last = float(vals[-1])
        sk[known] = np.maximum(diffs, 0)
    if borrow is not None and not np.any(~np.isnan(sk)):
        cols["skipped"] = sk = borrow(steps)
    if framework in WINDOWED and steps.size and np.any(sk >= 1):
        if prev_step is None:
            prev_step = int(steps[0]) - (int(np.median(np.diff(steps))) if steps.size > 1 else 1)
        gap = np.diff(steps, prepend=prev_step)
        all_skipped = ~np.isnan(sk) & (sk >= np.maximum(gap, 1))
        loss = np.where(all_skipped, np.nan, loss)
        cols["loss_bad"] = ((cols["loss_bad"] != 0) & ~all_skipped).astype(np.float64)
    return loss, cum_last


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
    windows: Windows | None = None  # set when folded: each point stands for one window
    tracked: dict[str, list] = field(default_factory=dict)  # see TRACKED: [first step, first, last step, last, changes]

    @property
    def n_points(self) -> int:
        """Logged points (after de-duplication when not folded; as logged when folded)."""
        return int(self.windows.a["count"].sum()) if self.windows is not None else int(self.steps.size)

    @property
    def first_step(self) -> int | None:
        if self.windows is not None and len(self.windows):
            return int(self.windows.a["first_step"][0])
        return int(self.steps[0]) if self.steps.size else None

    @property
    def min_loss(self) -> float | None:
        if self.windows is not None:
            v = self.windows.a["loss_min"]
            v = v[np.isfinite(v)]
        else:
            v = self.loss[np.isfinite(self.loss)]
        return float(v.min()) if v.size else None

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
        if self.windows is not None:
            a = self.windows.a
            multi = a["count"] > 1
            if np.any(multi):
                return int(np.median((a["last_step"][multi] - a["first_step"][multi]) / (a["count"][multi] - 1)))
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
        self._pending: dict[str, list[Record]] = {}  # step-less records before any progress counter
        self._dated: set[str] = set()                # frameworks whose records got a counter
        # Records found in columns by the vectorised reader, not yet added (see `queue`).
        self._queue: dict[str, list] = {}  # framework -> [Rows, index of the first row not added]
        # The queued records of every framework by line, as `_step_before` looks them up (worked
        # out again when a queue is replaced): [lines (a list once looked up _LOOKUPS times),
        # framework and index in its queue per line (None for one framework), the frameworks,
        # lookups so far].
        self._merged: list | None = None
        self._at = 0          # line of the item being added (its place in the stream)
        self._last_line = 0   # line of the record that set _last_step

    def queue(self, rows: Rows) -> None:
        """Train records of one framework found in columns, in line order, later in the stream
        than everything added so far. They are added lazily, as they would have been one by one:
        before a later record of the same framework, and all at `settle()`; an event in between
        still takes the step logged just before its line. Items added meanwhile pass their line
        (`add(item, at=line)`); an item without one settles the queue first."""
        step = rows.step
        sane = np.abs(step) <= MAX_STEP if step.dtype.kind in "iu" else np.isfinite(step) & (np.abs(step) <= MAX_STEP)
        if rows.inferred is not None:
            # Records that printed no step: an impossible hint is dropped (they are numbered in
            # order, as `add` does); they are only queued once their framework is dated.
            assert rows.framework in self._dated, "step-less records queued before their framework is dated"
            rows.step = np.where(rows.inferred & ~sane, np.nan, rows.step)
            sane |= rows.inferred
        if not sane.all():
            self.bad_steps += int(np.count_nonzero(~sane))
            rows = rows.part(sane)
        if not len(rows):
            return
        if rows.framework in self._queue:
            self._flush_queue(rows.framework)
        self._queue[rows.framework] = [rows, 0]
        self._merged = None

    def settle(self) -> None:
        """Add every queued record."""
        for fw in sorted(self._queue, key=lambda f: int(self._queue[f][0].line[self._queue[f][1]])):
            self._flush_queue(fw)

    def _flush_queue(self, fw: str, before: int | None = None) -> None:
        """Add the queued records of `fw` (those on lines before `before`, else all)."""
        rows, cur = self._queue[fw][:2]
        end = len(rows) if before is None else int(np.searchsorted(rows.line, before))
        if end > cur:
            self._new_cols_before(int(rows.line[cur]))
            cols = self._cols.get(fw)
            if cols is None:
                cols = self._cols[fw] = _Columns(fw)
            part = rows.part(slice(cur, end))
            if part.inferred is not None:  # no step and no hint: the record's number in the run
                part.step = self._numbered(fw, part.step, part.inferred, 0)
            cols.extend(part)
            self._ordinal[fw] = self._ordinal.get(fw, 0) + end - cur
            last = int(rows.line[end - 1])
            if last > self._last_line:
                self._last_line, self._last_step = last, cols.last_step
        if end >= len(rows):
            del self._queue[fw]
        else:
            self._queue[fw][1] = end

    def _new_cols_before(self, line: int) -> None:
        """Frameworks keep the order of their first record (it breaks ties in `primary`): create
        the columns of queued frameworks whose first record comes before `line`."""
        for fw in sorted((f for f in self._queue if f not in self._cols), key=lambda f: int(self._queue[f][0].line[0])):
            if int(self._queue[fw][0].line[0]) < line:
                self._cols[fw] = _Columns(fw)

    def _numbered(self, fw: str, step: np.ndarray, inferred: np.ndarray, first: int) -> np.ndarray:
        """Steps of queued records of `fw` (the first being its `first`-th not yet added): those
        that printed neither a step nor a hint get their number in the run, as `add` gives them."""
        gap = inferred & np.isnan(step)
        if not gap.any():
            return step
        n = self._ordinal.get(fw, 0) + first + 1 + np.arange(step.size)
        return np.where(gap, n, step)

    def _step_before(self, line: int) -> int | None:
        """The step of the last record before `line`, queued records included. (A queued record
        already added lies on or before `_last_line`: the last queued one before `line` is the one
        to look at, whichever framework's; on one line, the first framework queued.)"""
        best_line, best = self._last_line, self._last_step
        merged = self._merged
        if merged is None:
            fws = list(self._queue)
            if len(fws) == 1:  # (one framework queued, the usual case: its lines as they are)
                lines = self._queue[fws[0]][0].line
                merged = [lines, None, None, fws, 0]
            else:
                lines = np.concatenate([self._queue[f][0].line for f in fws])
                who = np.repeat(np.arange(len(fws)), [len(self._queue[f][0]) for f in fws])
                order = np.lexsort((-who, lines))
                ks = np.concatenate([np.arange(len(self._queue[f][0])) for f in fws])
                merged = [lines[order], who[order], ks[order], fws, 0]
            self._merged = merged
        if merged[4] < _LOOKUPS:
            merged[4] += 1
            j = int(np.searchsorted(merged[0], line)) - 1
            at = int(merged[0][j]) if j >= 0 else None
        else:
            if merged[4] == _LOOKUPS:
                merged[4] += 1
                merged[0] = merged[0].tolist()
            j = bisect.bisect_left(merged[0], line) - 1
            at = merged[0][j] if j >= 0 else None
        if at is not None and at > best_line:
            fw = merged[3][0 if merged[1] is None else int(merged[1][j])]
            rows, cur = self._queue[fw][:2]
            k = j if merged[2] is None else int(merged[2][j])
            if k >= cur:
                best_line, best = self._step_at(fw, rows, k, cur)
        return best

    def _step_at(self, fw: str, rows, k: int, cur: int) -> tuple[int, int]:
        """(line, step) of queued record k of `fw` (the first not added being `cur`)."""
        step = rows.step[k:k + 1]
        if rows.inferred is not None:
            step = self._numbered(fw, step, rows.inferred[k:k + 1], k - cur)
        return int(rows.line[k]), int(np.trunc(step[0]))

    def counts_only(self) -> bool:
        """Events are only counted from now on (MAX_EVENTS of them kept): a reader may pass their
        kinds (`count_event`) instead of the events, but for re-run verdicts."""
        return len(self.events) >= MAX_EVENTS

    def count_event(self, kind: str, n: int = 1) -> None:
        """`n` events of `kind`, once `counts_only()`."""
        assert self.counts_only()
        self.event_counts[kind] = self.event_counts.get(kind, 0) + n

    def count_evals(self, n: int) -> None:
        """`n` evaluation records (what `add` keeps of one: that it came)."""
        self.evals += n

    def dated(self, framework: str) -> bool:
        """Records of `framework` that print no step are numbered as they come (no longer held
        for a progress counter to date them): they may be queued in columns."""
        return framework in self._dated

    def add(self, item: Record | Event, at: int | None = None) -> None:
        if self._queue:
            if at is None:
                self.settle()
            elif isinstance(item, Record) and item.kind == "train" and item.framework in self._queue:
                self._flush_queue(item.framework, at)
        self._at = at if at is not None else self._last_line
        if isinstance(item, Event):
            if item.kind == "rerun_unexpected_result" and item.step is not None:
                self._rerun_step = item.step
            if item.step is None and item.kind.startswith("rerun_") and self._rerun_step is not None:
                item.step = self._rerun_step  # verdict lines belong to the iteration being re-run
            self.event_counts[item.kind] = self.event_counts.get(item.kind, 0) + 1
            if len(self.events) >= MAX_EVENTS:
                return  # (only counted: its step is not needed)
            if item.step is None and item.kind != "checkpoint_load":
                # the step logged just before the line
                item.step = self._step_before(at) if self._queue and at is not None else self._last_step
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
        fw = item.framework
        if item.step is None:
            # A trainer that prints no step (HF dicts) is dated by the progress-bar counter before
            # its line; lines before the first counter wait for it instead of taking ordinals 1, 2, ...
            if item.step_hint is None and fw not in self._dated:
                pending = self._pending.setdefault(fw, [])
                if len(pending) < MAX_PENDING:
                    pending.append(item)
                    return
                self._dated.add(fw)  # no counter in sight: stop waiting, keep the line order
                for rec in self._pending.pop(fw, []):
                    self._add_train(rec)
            elif item.step_hint is not None and fw not in self._dated:
                self._dated.add(fw)
                for rec in _date_pending(self._pending.pop(fw, []), item):
                    self._add_train(rec)
        self._add_train(item)

    def _add_train(self, item: Record) -> None:
        cols = self._cols.get(item.framework)
        if cols is None:
            if self._queue:
                self._new_cols_before(self._at)
            cols = self._cols[item.framework] = _Columns(item.framework)
        n = self._ordinal.get(item.framework, 0) + 1
        self._ordinal[item.framework] = n
        cols.add(item, n)
        self._last_step = cols.last_step
        self._last_line = max(self._last_line, self._at)

    def flush_pending(self) -> None:
        """Step-less records no counter ever dated keep their line order (1, 2, ...)."""
        self.settle()
        pending, self._pending = self._pending, {}
        for recs in pending.values():
            for rec in recs:
                self._add_train(rec)

    def frameworks(self) -> dict[str, int]:
        self.flush_pending()
        return {k: len(v) for k, v in self._cols.items()}

    def primary(self) -> str | None:
        """The framework whose records carry the curve: most records with a loss, then most records."""
        self.flush_pending()
        if not self._cols:
            return None
        return max(self._cols, key=lambda k: (self._cols[k].with_loss > 0, len(self._cols[k]),
                                              k == "hf_trainer_state"))

    def build(self, framework: str | None = None) -> StepSeries | None:
        self.settle()
        framework = framework or self.primary()
        if framework is None:
            return None
        c = self._cols[framework]
        if c.windows is not None:
            return self._build_folded(framework, c)
        steps, loss, cols = last_wins(*c.buffered())
        loss, _ = normalise(steps, loss, cols, framework, c.cumulative, borrow=self._borrow(framework))
        runs = {k: Runs.of(v) for k, v in cols.items()}
        restarts, duplicates = c.restarts, c.duplicates
        return StepSeries(
            run=self.run, role=self.role, framework=framework, steps=steps, loss=loss, runs=runs,
            windowed=framework in WINDOWED, step_inferred=c.inferred > 0, restarts=restarts,
            duplicate_lines=duplicates, eval_records=self.evals, events=list(self.events),
            event_counts=dict(self.event_counts), sources=list(self.sources), tracked=dict(c.tracked))

    def _borrow(self, framework: str):
        """A DeepSpeed engine line without loss can sit beside the client's loss lines: the
        function giving its skip counts at given steps, for a curve that has none of its own."""
        if "deepspeed" not in self._cols or framework == "deepspeed":
            return None

        def borrow(steps: np.ndarray) -> np.ndarray:
            aux = self.build("deepspeed")
            if aux is None or not aux.steps.size:
                return np.full(steps.size, _NAN)
            lookup = dict(zip(aux.steps.tolist(), aux.skipped.tolist()))
            return np.array([lookup.get(s, _NAN) for s in steps.tolist()], dtype=np.float64)
        return borrow

    def _build_folded(self, framework: str, c: _Columns) -> StepSeries:
        c.fold(final=True)
        assert c.windows is not None
        steps, loss, runs = c.windows.series()
        borrow = self._borrow(framework)
        if borrow is not None and not runs["skipped"].any_present():
            runs["skipped"] = Runs.of(borrow(steps))
        return StepSeries(
            run=self.run, role=self.role, framework=framework, steps=steps, loss=loss, runs=runs,
            windowed=framework in WINDOWED, step_inferred=c.inferred > 0, restarts=c.restarts,
            duplicate_lines=c.duplicates, eval_records=self.evals, events=list(self.events),
            event_counts=dict(self.event_counts), sources=list(self.sources), windows=c.windows,
            tracked=dict(c.tracked))


def _date_pending(pending: list[Record], first_dated: Record) -> list[Record]:
    """Steps for the records logged before the first one a progress counter dates: from the epoch
    both print (epoch is proportional to the step), else assuming the trainer logs every
    `counter / (k + 1)` steps from that step on (HF logs at multiples of logging_steps). Records
    that cannot be dated keep their order only (hint None, ordinal later)."""
    if not pending:
        return []
    h = first_dated.step_hint
    k = len(pending)
    e1 = first_dated.extra.get("epoch") if first_dated.extra else None
    interval = h / (k + 1) if h and h % (k + 1) == 0 else None
    out = []
    for i, rec in enumerate(pending):
        guess = None
        if interval is not None:
            guess = int(interval * (i + 1))
        e0 = rec.extra.get("epoch") if rec.extra else None
        if guess is None and e0 and e1 and e1 > 0 and 0 < e0 < e1:
            guess = max(1, int(round(h * e0 / e1)))
        if guess is not None and (not out or guess > (out[-1].step_hint or 0)) and guess < h:
            rec.step_hint = guess
        out.append(rec)
    if any(r.step_hint is None for r in out):
        for r in out:
            r.step_hint = None  # a partial dating would mix schemes: keep the line order
    return out


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
