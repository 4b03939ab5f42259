"""Curve measurements: aligning two step series on their common steps (re-averaging the finer
series when log intervals differ and values are window averages) and the error, divergence,
drift, ratio, spike, NaN-window and loss-scale measures the symptom facts carry. Pure numpy;
no thresholds are verdicts here except the noise band used to call a divergence sustained."""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from precdx.collectors.logs.series import StepSeries
from precdx.kb import tolerance

EPS = 1e-12
# the acceptance tolerances, named in kb/verdict/aligned.within_noise.yaml (thresholds)
DEFAULT_LOSS_BAND = tolerance("step_rel_err")       # a compared step departs above 1% relative loss error
DEFAULT_GRAD_BAND = tolerance("grad_norm_rel_err")  # 10% relative grad-norm error
NAN_WINDOW = 50               # kb §1.3: NaN counts compared within 50 steps
SUSTAIN = 5                   # consecutive compared points beyond the band = sustained divergence
SPIKE_LOOKBACK = 10
SPIKE_RECOVERY = 10


def _values(s: StepSeries, name: str) -> np.ndarray:
    return s.loss if name == "loss" else s.grad_norm


def align(a: StepSeries, b: StepSeries, name: str = "loss") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(steps, a_values, b_values) on the steps both logged. When one side logs more often and its
    values are window averages, its points inside each common window are averaged, so both sides
    describe the same iterations."""
    va, vb = _values(a, name), _values(b, name)
    # Built series hold unique sorted steps: the intersection needs no de-duplicating copies.
    common = a.steps if np.array_equal(a.steps, b.steps) else np.intersect1d(a.steps, b.steps, assume_unique=True)
    if common.size == 0:
        return common, np.zeros(0), np.zeros(0)
    return common, _resample(a.steps, va, common, a.windowed), _resample(b.steps, vb, common, b.windowed)


def _resample(steps: np.ndarray, values: np.ndarray, grid: np.ndarray, windowed: bool) -> np.ndarray:
    if grid.size == steps.size:
        return values  # the grid is this series' own steps (read-only use: no copy)
    idx = np.searchsorted(steps, grid)
    direct = values[idx]
    if not windowed:
        return direct
    # Window k covers (grid[k-1], grid[k]]; the first window spans one grid interval.
    gap = int(np.median(np.diff(grid))) if grid.size > 1 else 1
    lo = np.concatenate([[grid[0] - gap], grid[:-1]])
    start = np.searchsorted(steps, lo, side="right")
    out = direct.copy()
    for k in range(grid.size):
        seg = values[start[k]:idx[k] + 1]
        if seg.size > 1:
            fin = seg[np.isfinite(seg)]
            out[k] = fin.mean() if fin.size == seg.size else math.nan
    return out


def rel_err(t: np.ndarray, b: np.ndarray) -> np.ndarray:
    return _over_abs(np.abs(t - b), b)


def _over_abs(num: np.ndarray, b: np.ndarray) -> np.ndarray:
    """num / max(|b|, EPS), computed in place in `num` (one temporary instead of three)."""
    den = np.abs(b)
    np.maximum(den, EPS, out=den)
    np.divide(num, den, out=num)
    return num


def first_sustained(err: np.ndarray, steps: np.ndarray, band: float, sustain: int = SUSTAIN) -> int | None:
    """First step of the first run of `sustain` consecutive points with error above `band` (a
    non-finite error counts as above). A run still going when the series ends counts once it
    has min(sustain, 3) points: a run that crashed right after diverging still diverged."""
    above = ~(err <= band)
    run = 0
    for i in range(above.size):
        if above[i]:
            run += 1
            if run >= sustain:
                return int(steps[i - run + 1])
        else:
            run = 0
    if run and run >= min(sustain, 3):
        return int(steps[above.size - run])
    return None


def drift_slope(steps: np.ndarray, signed: np.ndarray) -> float | None:
    """Least-squares slope of the signed relative error, per 1000 steps."""
    ok = np.isfinite(signed)
    if ok.sum() < 3:
        return None
    x = steps[ok].astype(float)
    if np.ptp(x) == 0:
        return None
    # closed-form least squares: one centred temporary instead of polyfit's Vandermonde matrix
    y = signed[ok]
    x -= x.mean()
    return float(np.dot(x, y - y.mean()) / np.dot(x, x) * 1000.0)


def thirds(n: int) -> tuple[slice, slice]:
    k = max(1, n // 3)
    return slice(0, k), slice(n - k, n)


@dataclass
class CurveDiff:
    """Measurements of one curve (loss or grad norm) of run `t` against `b`."""

    steps: np.ndarray
    t: np.ndarray
    b: np.ndarray
    err: np.ndarray
    signed: np.ndarray

    @classmethod
    def of(cls, t: StepSeries, b: StepSeries, name: str = "loss") -> "CurveDiff":
        steps, tv, bv = align(t, b, name)
        with np.errstate(invalid="ignore", divide="ignore"):
            signed = _over_abs(tv - bv, bv)
            err = np.abs(signed)
        return cls(steps, tv, bv, err, signed)

    @property
    def finite(self) -> np.ndarray:
        return np.isfinite(self.t) & np.isfinite(self.b)

    def mean(self, part: slice | None = None) -> float | None:
        err = self.err if part is None else self.err[part]
        fin = err[np.isfinite(err)]
        return float(fin.mean()) if fin.size else None


def noise_band(a: StepSeries, b: StepSeries, floor: float = 0.0) -> float | None:
    """Run-to-run relative loss difference of two runs of the same side: the 95th percentile of
    the per-step relative difference (None when they share no finite step)."""
    d = CurveDiff.of(a, b)
    fin = d.err[np.isfinite(d.err)]
    if fin.size == 0:
        return None
    return max(float(np.percentile(fin, 95)), floor)


def ratio_stats(d: CurveDiff) -> tuple[float | None, float | None]:
    ok = d.finite & (np.abs(d.b) > EPS)
    if ok.sum() < 2:
        return None, None
    r = d.t[ok] / d.b[ok]
    mean = float(r.mean())
    return mean, float(r.std() / abs(mean)) if abs(mean) > EPS else None


def final_rel_err(d: CurveDiff, last: int = 10) -> float | None:
    ok = d.finite
    if not ok.any():
        return None
    t, b = d.t[ok][-last:], d.b[ok][-last:]
    return float(abs(t.mean() - b.mean()) / max(abs(b.mean()), EPS))


# ---- spikes ------------------------------------------------------------------------------------

@dataclass
class Spikes:
    steps: list[int]
    recovered: int


def find_spikes(steps: np.ndarray, values: np.ndarray, rel_jump: float = 0.10, z: float = 6.0) -> Spikes:
    """Points that jump above the running median of the previous points by more than `rel_jump`
    and more than `z` robust deviations. A spike recovers when a value within `rel_jump/2` of that
    median appears within SPIKE_RECOVERY points.

    The running medians are computed in blocks of sliding windows (a per-point np.median call
    made a 1 GB log take minutes); only the few candidate points are then walked in order, so
    one excursion still counts once."""
    out: list[int] = []
    recovered = 0
    n = values.size
    values = np.asarray(values, dtype=np.float64)
    cand, meds = _spike_candidates(values, rel_jump, z)
    next_allowed = 0
    for i, med in zip(cand.tolist(), meds.tolist()):
        if i < next_allowed:
            continue  # inside the excursion of the previous spike
        out.append(int(steps[i]))
        after = values[i + 1:i + 1 + SPIKE_RECOVERY]
        if np.any(np.isfinite(after) & (after <= med * (1 + rel_jump / 2))):
            recovered += 1
        i += 1
        # Skip the rest of this excursion so one event counts once.
        while i < n and np.isfinite(values[i]) and values[i] > med * (1 + rel_jump):
            i += 1
        next_allowed = i
    return Spikes(out, recovered)


def _spike_candidates(values: np.ndarray, rel_jump: float, z: float,
                      block: int = 1 << 16) -> tuple[np.ndarray, np.ndarray]:
    """Indices whose value jumps above the median of the SPIKE_LOOKBACK points before them (at
    least 3 of them finite), with those medians. Memory: one block of windows at a time."""
    n = values.size
    if n <= SPIKE_LOOKBACK:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    finite = np.where(np.isfinite(values), values, np.nan)
    windows = np.lib.stride_tricks.sliding_window_view(finite, SPIKE_LOOKBACK)  # windows[k] = finite[k:k+L]
    idx_parts, med_parts = [], []
    for start in range(SPIKE_LOOKBACK, n, block):
        stop = min(start + block, n)
        win = windows[start - SPIKE_LOOKBACK:stop - SPIKE_LOOKBACK]   # the points before start..stop-1
        v = values[start:stop]
        enough = np.sum(~np.isnan(win), axis=1) >= 3
        with np.errstate(invalid="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN windows: excluded by `enough`
            med = np.nanmedian(win, axis=1)
            mad = np.nanmedian(np.abs(win - med[:, None]), axis=1) * 1.4826
            floor = np.maximum(mad, EPS * np.maximum(np.abs(med), 1.0))
            hit = enough & np.isfinite(v) & (v > med * (1 + rel_jump)) & (v - med > z * floor)
        where = np.nonzero(hit)[0]
        idx_parts.append(where + start)
        med_parts.append(med[where])
    return np.concatenate(idx_parts), np.concatenate(med_parts)


# ---- NaN / skip windows ------------------------------------------------------------------------

def nan_weights(s: StepSeries) -> np.ndarray:
    """NaN iterations per logged point: the framework's counter, or 1 for a non-finite value."""
    counter = np.nan_to_num(s.nan_iters, nan=0.0)
    return np.maximum(counter, s.nonfinite.astype(float))


def max_in_window(steps: np.ndarray, weights: np.ndarray, width: int = NAN_WINDOW) -> float:
    """Largest total weight of points whose steps fall within any `width`-step window."""
    if steps.size == 0 or not np.any(weights):
        return 0.0  # what the general path gives for all-zero weights, without its 7 temporaries
    csum = np.concatenate([[0.0], np.cumsum(weights)])
    ends = np.searchsorted(steps, steps + width - 1, side="right")
    starts = np.arange(steps.size)
    return float(np.max(csum[ends] - csum[starts]))


def first_step_where(steps: np.ndarray, mask: np.ndarray) -> int | None:
    idx = np.flatnonzero(mask)
    return int(steps[idx[0]]) if idx.size else None


# ---- loss scale --------------------------------------------------------------------------------

@dataclass
class ScaleTrend:
    values: np.ndarray
    source: str  # "log" | "overflow_events" | "absent"

    def summary(self) -> dict:
        v = self.values[np.isfinite(self.values)]
        if v.size == 0:
            return {"trend": "absent", "values_from": "absent"}
        d = np.diff(v)
        dec, inc = int(np.sum(d < 0)), int(np.sum(d > 0))
        first, last, vmin, vmax = float(v[0]), float(v[-1]), float(v.min()), float(v.max())
        if last < first and dec > inc:
            trend = "falling"
        elif last > first and inc > dec:
            trend = "rising"
        else:
            trend = "stable"
        # Collapse: fell to the scaler floor region (<= 1) from above, or lost >= 2^10 overall.
        collapsed = bool(vmax > 1.0 and (last <= 1.0 or last <= vmax / 1024.0))
        return {"trend": trend, "values_from": self.source, "first": first, "last": last, "min": vmin,
                "max": vmax, "n_decreases": dec, "n_increases": inc, "collapsed": collapsed}


def scale_trend(s: StepSeries) -> ScaleTrend:
    if s.has_loss_scale:
        return ScaleTrend(s.loss_scale, "log")
    seq: list[float] = []
    for e in s.events:
        if e.kind == "overflow" and e.attempted is not None:
            if not seq:
                seq.append(e.attempted)
            seq.append(e.reduced_to if e.reduced_to is not None else e.attempted)
    if seq:
        return ScaleTrend(np.array(seq, dtype=float), "overflow_events")
    return ScaleTrend(np.zeros(0), "absent")
