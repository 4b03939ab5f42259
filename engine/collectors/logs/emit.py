"""Turns step series into facts: per-run curve facts, target-vs-baseline symptom facts, rerun
reproducibility, and outliers among grouped runs. Measurements only; tolerances live in rules."""
from __future__ import annotations

import math
import warnings
from typing import Iterable

import numpy as np

from precdx.collectors.logs import compare as cmp
from precdx.collectors.logs.series import StepSeries
from precdx.facts import Fact, make

OUTLIER_Z = 3.5
OUTLIER_MIN_LOSS_ERR = 1e-4   # a group's loss off its siblings by > 0.01% with a large z
OUTLIER_MIN_GN_ERR = 0.01     # a group's grad norm off its siblings by > 1% with a large z


def _f(x: float | None) -> float | None:
    return None if x is None else float(x)


def _src(*series: StepSeries) -> str:
    seen: list[str] = []
    for s in series:
        for p in s.sources:
            if p not in seen:
                seen.append(p)
    return ",".join(seen) or None  # type: ignore[return-value]


def skipped_total(s: StepSeries) -> int:
    return int(np.nansum(s.skipped)) if s.skipped.size else 0


def series_facts(s: StepSeries) -> Iterable[Fact]:
    """loss_series, loss_scale_trend and log_event facts of one run."""
    min_loss = s.min_loss
    nan_w = cmp.nan_weights(s)
    yield make("loss_series", role=s.role, run=s.run, group=s.group, framework=s.framework, n_points=s.n_points,
               first_step=s.first_step, last_step=int(s.steps[-1]) if len(s) else None,
               log_interval=s.log_interval, windowed=s.windowed, step_inferred=s.step_inferred,
               first_loss=_f(s.loss[0]) if len(s) else None, last_loss=_f(s.loss[-1]) if len(s) else None,
               min_loss=_f(min_loss) if min_loss is not None else None, nan_count=int(nan_w.sum()),
               first_nan_step=cmp.first_step_where(s.steps, nan_w > 0), skipped_count=skipped_total(s),
               overflow_events=s.event_counts.get("overflow", 0), restarts=s.restarts,
               has_grad_norm=s.has_grad_norm, has_loss_scale=s.has_loss_scale, eval_points=s.eval_records,
               source=_src(s))
    trend = cmp.scale_trend(s).summary()
    yield make("loss_scale_trend", run=s.run, role=s.role, source=_src(s), **trend)
    yield from event_facts(s)


def event_facts(s: StepSeries) -> Iterable[Fact]:
    by_kind: dict[str, list] = {}
    for e in s.events:
        by_kind.setdefault(e.kind, []).append(e)
    for kind, count in sorted(s.event_counts.items()):
        evs = by_kind.get(kind, [])
        first = evs[0] if evs else None
        step = next((e.step for e in evs if e.step is not None), None)
        node = next((e.node for e in evs if e.node), None)
        yield make("log_event", run=s.run, role=s.role, kind=kind, count=count, step=step, node=node,
                   message=first.message if first else None, source=_src(s))
    if s.restarts and "restart" not in s.event_counts:
        yield make("log_event", run=s.run, role=s.role, kind="restart", count=s.restarts, source=_src(s))


def compare_facts(t: StepSeries, b: StepSeries, noise: float | None) -> Iterable[Fact]:
    """loss_compare, grad_norm_compare, nan_compare and spike_compare of `t` against `b`."""
    src = _src(t, b)
    ident = dict(run=t.run, role=t.role, against=b.run)
    d = cmp.CurveDiff.of(t, b, "loss")
    n = int(d.steps.size)
    band = max(noise, 0.001) if noise is not None else cmp.DEFAULT_LOSS_BAND
    early, late = cmp.thirds(n)
    loss_div = cmp.first_sustained(d.err, d.steps, band) if n else None
    ratio_mean, ratio_cv = cmp.ratio_stats(d)
    mean = d.mean()
    t_last = int(t.steps[-1]) if len(t) else None
    b_last = int(b.steps[-1]) if len(b) else None
    over = cmp.first_step_where(d.steps, ~(d.err <= cmp.DEFAULT_LOSS_BAND)) if n else None
    yield make("loss_compare", **ident, steps_compared=n,
               first_step=int(d.steps[0]) if n else None, last_step=int(d.steps[-1]) if n else None,
               run_last_step=t_last, against_last_step=b_last,
               stopped_early=bool(t_last is not None and b_last is not None and t_last < b_last),
               first_step_rel_err=_f(d.err[0]) if n else None,
               first_step_abs_err=_f(abs(float(d.t[0]) - float(d.b[0]))) if n else None,
               second_step_rel_err=_f(d.err[1]) if n > 1 else None,
               first_rel_err_over_1pct_step=over,
               mean_rel_err=mean, mean_rel_err_early=d.mean(early) if n else None,
               mean_rel_err_late=d.mean(late) if n else None,
               max_rel_err=_f(np.max(d.err)) if n else None,
               mean_signed_rel_err=_nanmean(d.signed), final_rel_err=cmp.final_rel_err(d),
               drift_slope=cmp.drift_slope(d.steps, d.signed) if n else None,
               ratio_mean=ratio_mean, ratio_cv=ratio_cv, noise_band=noise, band_used=band,
               within_noise_band=(mean <= noise) if (noise is not None and mean is not None) else None,
               first_divergence_step=loss_div, source=src)
    del d  # the loss curves' measurements are done: free them before the grad-norm ones

    if t.has_grad_norm and b.has_grad_norm:
        g = cmp.CurveDiff.of(t, b, "grad_norm")
        ok = ~(np.isnan(g.t) & np.isnan(g.b))
        steps, err = g.steps[ok], g.err[ok]
        gn_div = cmp.first_sustained(err, steps, cmp.DEFAULT_GRAD_BAND) if steps.size else None
        departs = None
        lead = None
        if gn_div is not None:
            departs = loss_div is None or gn_div < loss_div
            lead = (loss_div - gn_div) if loss_div is not None else None
        g_ratio_mean, g_ratio_cv = cmp.ratio_stats(g)
        yield make("grad_norm_compare", **ident, steps_compared=int(steps.size),
                   first_step_rel_err=_f(err[0]) if steps.size else None,
                   mean_rel_err=_nanmean(err), max_rel_err=_f(np.max(err)) if steps.size else None,
                   first_divergence_step=gn_div, loss_divergence_step=loss_div, departs_before_loss=departs,
                   lead_steps=lead, late_growth_ratio=_growth_ratio(g.t[ok], g.b[ok]),
                   ratio_mean=g_ratio_mean, ratio_cv=g_ratio_cv, source=src)
        del g, ok, steps, err

    # One dense weight array at a time (each is 8 bytes a point).
    nan_t, nan_b = _nan_stats(t), _nan_stats(b)
    yield make("nan_compare", **ident, target_nan_count=nan_t[0], baseline_nan_count=nan_b[0],
               target_skipped_count=skipped_total(t), baseline_skipped_count=skipped_total(b),
               target_first_nan_step=nan_t[1], baseline_first_nan_step=nan_b[1],
               target_max_nan_50=nan_t[2], baseline_max_nan_50=nan_b[2],
               target_max_skipped_50=_max_skipped_50(t), baseline_max_skipped_50=_max_skipped_50(b),
               target_overflow_events=t.event_counts.get("overflow", 0),
               baseline_overflow_events=b.event_counts.get("overflow", 0), source=src)

    tsp, bsp = cmp.find_spikes(t.steps, t.loss), cmp.find_spikes(b.steps, b.loss)
    t_rate = 1000.0 * len(tsp.steps) / max(_span(t), 1)
    b_rate = 1000.0 * len(bsp.steps) / max(_span(b), 1)
    ratio = None
    if tsp.steps or bsp.steps:
        ratio = t_rate / b_rate if b_rate > 0 else math.inf
    yield make("spike_compare", **ident, target_spikes=len(tsp.steps), baseline_spikes=len(bsp.steps),
               target_rate=t_rate, baseline_rate=b_rate, rate_ratio=ratio,
               target_first_spike_step=tsp.steps[0] if tsp.steps else None, target_recovered=tsp.recovered,
               target_gn_spikes=len(cmp.find_spikes(t.steps, t.grad_norm).steps),
               baseline_gn_spikes=len(cmp.find_spikes(b.steps, b.grad_norm).steps), source=src)


def _nan_stats(s: StepSeries) -> tuple[int, int | None, int]:
    """(NaN count, first NaN step, most NaNs within 50 steps) of one run."""
    w = cmp.nan_weights(s)
    return int(w.sum()), cmp.first_step_where(s.steps, w > 0), int(cmp.max_in_window(s.steps, w))


def _max_skipped_50(s: StepSeries) -> int:
    return int(cmp.max_in_window(s.steps, np.nan_to_num(s.skipped, nan=0.0)))


def _span(s: StepSeries) -> int:
    return int(s.steps[-1] - s.steps[0] + 1) if len(s) else 0


def _nanmean(x: np.ndarray) -> float | None:
    fin = x[np.isfinite(x)]
    return float(fin.mean()) if fin.size else None


def _growth_ratio(t: np.ndarray, b: np.ndarray) -> float | None:
    early, late = cmp.thirds(t.size)
    vals = []
    for arr in (t, b):
        e, l_ = arr[early], arr[late]
        e, l_ = e[np.isfinite(e)], l_[np.isfinite(l_)]
        if not e.size or not l_.size or abs(e.mean()) < cmp.EPS:
            return None
        vals.append(l_.mean() / e.mean())
    return float(vals[0] / vals[1]) if abs(vals[1]) > cmp.EPS else None


def rerun_fact(run: StepSeries, rerun: StepSeries) -> Fact:
    steps, a, b = cmp.align(run, rerun, "loss")
    _, ga, gb = cmp.align(run, rerun, "grad_norm")
    same = _same(a, b) & _same(ga, gb)
    with np.errstate(invalid="ignore", divide="ignore"):
        err = cmp.rel_err(a, b)
    fin = err[np.isfinite(err)]
    diff_idx = np.flatnonzero(~same)
    return make("rerun_compare", role=run.role, run=run.run, rerun=rerun.run, steps_compared=int(steps.size),
                identical=bool(steps.size and same.all()),
                first_step_identical=bool(steps.size and _same(a[:1], b[:1]).all()),
                first_diff_step=int(steps[diff_idx[0]]) if diff_idx.size else None,
                first_diff_dump_step=max(int(steps[diff_idx[0]]) - 1, 0) if diff_idx.size else None,
                max_rel_diff=float(fin.max()) if fin.size else None,
                mean_rel_diff=float(fin.mean()) if fin.size else None, source=_src(run, rerun))


def _same(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a == b) | (np.isnan(a) & np.isnan(b))


def group_facts(groups: list[StepSeries], baseline: StepSeries | None) -> Iterable[Fact]:
    """group_outlier per grouped run and one group_summary: each group's loss and grad norm against
    the median curves of the other groups (a faulty node group stands out from its siblings,
    whatever the baseline does)."""
    groups = [g for g in groups if len(g)]
    if len(groups) < 2:
        return
    loss_dev = [_err_vs_median(g, [o for o in groups if o is not g], "loss") for g in groups]
    gn_dev = [_err_vs_median(g, [o for o in groups if o is not g], "grad_norm") for g in groups]
    loss_z, gn_z = _robust_z(loss_dev), _robust_z(gn_dev)
    spikes = [len(cmp.find_spikes(g.steps, g.loss).steps) for g in groups]
    gn_spikes = [len(cmp.find_spikes(g.steps, g.grad_norm).steps) for g in groups]
    nans = [int(cmp.nan_weights(g).sum()) for g in groups]
    outliers: list[StepSeries] = []
    zs: list[float] = []
    for i, g in enumerate(groups):
        cands = [z for z in (loss_z[i], gn_z[i]) if z is not None]
        z = max(cands) if cands else None
        if z is not None:
            zs.append(z)
        big = ((loss_z[i] or 0) > OUTLIER_Z and (loss_dev[i] or 0) > OUTLIER_MIN_LOSS_ERR) or \
              ((gn_z[i] or 0) > OUTLIER_Z and (gn_dev[i] or 0) > OUTLIER_MIN_GN_ERR)
        alone = any(v[i] > 0 and sum(1 for x in v if x > 0) == 1 for v in (spikes, gn_spikes, nans))
        is_out = bool(big or alone)
        if is_out:
            outliers.append(g)
        vs_base = cmp.CurveDiff.of(g, baseline).mean() if baseline is not None and len(baseline) else None
        yield make("group_outlier", run=g.run, role=g.role, group=g.group or g.run,
                   mean_rel_err_vs_groups=loss_dev[i], gn_rel_err_vs_groups=gn_dev[i],
                   mean_rel_err_vs_baseline=vs_base, spikes=spikes[i], gn_spikes=gn_spikes[i], nan_count=nans[i],
                   z_score=z, is_outlier=is_out, hosts=",".join(g.hosts) or None, source=_src(g))
    finite = [d for d in loss_dev if d is not None]
    yield make("group_summary", role=groups[0].role, n_groups=len(groups), n_outliers=len(outliers),
               max_z_score=max(zs) if zs else None, spread=float(np.median(finite)) if finite else None,
               outlier_groups=",".join(g.group or g.run for g in outliers) or None,
               outlier_hosts=",".join(h for g in outliers for h in g.hosts) or None, source=_src(*groups))


def _robust_z(values: list[float | None]) -> list[float | None]:
    """(x - median) / (1.4826 MAD), the MAD floored so identical siblings do not give infinite z;
    capped at 1e6 to stay readable."""
    fin = np.array([v for v in values if v is not None], dtype=float)
    if fin.size == 0:
        return [None] * len(values)
    med = float(np.median(fin))
    mad = max(float(np.median(np.abs(fin - med))) * 1.4826, 1e-6, 1e-3 * abs(med))
    return [None if v is None else float(min((v - med) / mad, 1e6)) for v in values]


def _err_vs_median(g: StepSeries, others: list[StepSeries], name: str) -> float | None:
    steps = g.steps
    for o in others:
        steps = np.intersect1d(steps, o.steps)
    if steps.size == 0:
        return None
    pick = (lambda s: s.loss) if name == "loss" else (lambda s: s.grad_norm)
    mine = pick(g)[np.searchsorted(g.steps, steps)]
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns are expected (no grad norm)
        ref = np.nanmedian(np.vstack([pick(o)[np.searchsorted(o.steps, steps)] for o in others]), axis=0)
        err = cmp.rel_err(mine, ref)
    fin = err[np.isfinite(err)]
    return float(fin.mean()) if fin.size else None


# ------------------------------------------------------------------ per-iteration settings
LR_DIFF = 1e-3  # logs print lr with ~6 significant digits: beyond 0.1% is a real difference


def lr_fact(t: StepSeries, b: StepSeries) -> Fact | None:
    """lr_compare of `t` against `b`, or None when neither logs a learning rate, batch size or
    loss scale on both sides."""
    tl, bl = t.lr, b.lr
    has_lr = bool(np.any(np.isfinite(tl))) and bool(np.any(np.isfinite(bl)))
    tg, bg = _first_tracked(t, "global_batch_size"), _first_tracked(b, "global_batch_size")
    ts, bs = _first_finite(t.loss_scale), _first_finite(b.loss_scale)
    if not has_lr and (tg is None or bg is None) and (ts is None or bs is None):
        return None
    fields: dict = {}
    if has_lr:
        common = np.intersect1d(t.steps, b.steps, assume_unique=True)
        # A skipped iteration does not advance the scheduler (Megatron), so the printed lr lags
        # from there on without any schedule difference: compare the steps before the first skip.
        cut = min((x for x in (_first_skip(t), _first_skip(b)) if x is not None), default=None)
        if cut is not None:
            common = common[common < cut]
        a = tl[np.searchsorted(t.steps, common)]
        r = bl[np.searchsorted(b.steps, common)]
        ok = np.isfinite(a) & np.isfinite(r)
        steps, a, r = common[ok], a[ok], r[ok]
        if steps.size:
            with np.errstate(invalid="ignore", divide="ignore"):
                diff = np.abs(a - r) / np.maximum(np.abs(r), cmp.EPS)
                pos = r > 0
                ratio = a[pos] / r[pos]
            over = np.flatnonzero(diff > LR_DIFF)
            cv = None
            if ratio.size >= 2 and abs(ratio.mean()) > cmp.EPS:
                cv = float(ratio.std() / abs(ratio.mean()))
            fields.update(steps_compared=int(steps.size), target_first_lr=float(a[0]), baseline_first_lr=float(r[0]),
                          max_rel_diff=float(diff.max()), mean_rel_diff=float(diff.mean()),
                          first_diff_step=int(steps[over[0]]) if over.size else None, ratio_cv=cv,
                          schedule_differs=bool(over.size))
        tp, tps = _peak(t.steps, tl)
        bp, bps = _peak(b.steps, bl)
        fields.update(target_peak_lr=tp, target_peak_step=tps, baseline_peak_lr=bp, baseline_peak_step=bps)
    if tg is not None or bg is not None:
        fields.update(target_global_batch=tg, baseline_global_batch=bg,
                      global_batch_differs=(tg != bg) if tg is not None and bg is not None else None)
    fields.update(target_tokens_per_sample=_tokens_per_sample(t), baseline_tokens_per_sample=_tokens_per_sample(b),
                  target_first_loss_scale=ts, baseline_first_loss_scale=bs)
    return make("lr_compare", run=t.run, role=t.role, against=b.run, source=_src(t, b), **fields)


def _first_skip(s: StepSeries) -> int | None:
    sk = s.skipped
    hit = np.flatnonzero(np.nan_to_num(sk, nan=0.0) > 0)
    return int(s.steps[hit[0]]) if hit.size else None


def _first_tracked(s: StepSeries, name: str) -> float | None:
    t = s.tracked.get(name)
    return float(t[1]) if t else None


def _first_finite(x: np.ndarray) -> float | None:
    fin = x[np.isfinite(x)]
    return float(fin[0]) if fin.size else None


def _peak(steps: np.ndarray, values: np.ndarray) -> tuple[float | None, int | None]:
    ok = np.isfinite(values)
    if not ok.any():
        return None, None
    v = values[ok]
    i = int(np.argmax(v))
    return float(v[i]), int(steps[ok][i])


def _tokens_per_sample(s: StepSeries) -> float | None:
    tok, smp = s.tracked.get("consumed_tokens"), s.tracked.get("consumed_samples")
    if not tok or not smp:
        return None
    d_tok, d_smp = tok[3] - tok[1], smp[3] - smp[1]
    if d_smp > 0 and d_tok > 0:
        return float(d_tok / d_smp)
    if smp[1] > 0 and tok[1] > 0:
        return float(tok[1] / smp[1])
    return None


# ------------------------------------------------------------------ one run on its own
def health_fact(s: StepSeries, vocab: int | None, loads_checkpoint: bool | None) -> Fact:
    """run_health of one run: its curve against what a healthy run looks like."""
    n = len(s)
    loss = s.loss
    fin = np.isfinite(loss)
    first_loss = _f(loss[0]) if n else None
    uniform = math.log(vocab) if vocab and vocab > 1 else None
    gn = s.grad_norm
    has_gn = ~np.isnan(gn) | s.gn_bad
    gfin = np.isfinite(gn)
    bad = s.gn_bad
    max_gn = max_step = med = None
    if gfin.any():
        i = int(np.argmax(np.where(gfin, gn, -np.inf)))
        max_gn, max_step, med = float(gn[i]), int(s.steps[i]), float(np.median(gn[gfin]))
    early = late = drop = cv = None
    vals = loss[fin]
    if vals.size >= 4:
        q = max(1, vals.size // 4)
        e, lt = vals[:q], vals[-q:]
        early, late = float(e.mean()), float(lt.mean())
        drop = (early - late) / abs(early) if abs(early) > cmp.EPS else None
        cv = float(lt.std() / abs(late)) if abs(late) > cmp.EPS else None
    planned = s.tracked.get("total_steps")
    planned_steps = int(planned[3]) if planned else None
    last = int(s.steps[-1]) if n else None
    first_gn = None
    if n and has_gn[0]:
        first_gn = float(gn[0]) if not bad[0] else math.nan
    first_bad = cmp.first_step_where(s.steps, bad) if bad.any() else None
    finite_at_bad = None
    if first_bad is not None:
        i = int(np.searchsorted(s.steps, first_bad))
        finite_at_bad = bool(np.isfinite(loss[i]) and not s.loss_bad[i])
    nan_w = cmp.nan_weights(s)
    first_nan = cmp.first_step_where(s.steps, nan_w > 0) if n else None
    return make("run_health", run=s.run, role=s.role, first_step=s.first_step, first_loss=first_loss,
                vocab_size=vocab, uniform_loss=uniform,
                first_loss_ratio=(first_loss / uniform) if first_loss is not None and uniform and
                math.isfinite(first_loss) else None,
                loads_checkpoint=loads_checkpoint, first_grad_norm=first_gn, max_grad_norm=max_gn,
                max_grad_norm_step=max_step, median_grad_norm=med, grad_norm_points=int(has_gn.sum()),
                grad_norm_nonfinite=int(bad.sum()),
                first_nonfinite_grad_step=first_bad, loss_finite_at_first_bad_grad=finite_at_bad,
                first_nonfinite_loss_step=cmp.first_step_where(s.steps, s.loss_bad) if s.loss_bad.any() else None,
                first_nan_step=first_nan, nan_dump_step=max(first_nan - 1, 0) if first_nan is not None else None,
                loss_zero_points=int(np.sum(loss == 0.0)), loss_points=int(fin.sum()),
                early_loss=early, late_loss=late, loss_rel_drop=drop, late_loss_cv=cv,
                late_loss_ratio=(late / uniform) if late is not None and uniform else None,
                planned_steps=planned_steps, last_step=last,
                stopped_early=(last < planned_steps) if last is not None and planned_steps else None,
                source=_src(s))
