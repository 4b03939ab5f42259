"""Bounded-memory mode (issue 9): beyond PRECDX_LOG_MAX_POINTS points a run is folded into
per-window aggregates; the facts stay equal to the unbounded ones within the tolerances the
module docstring of precdx.collectors.logs.series documents."""
from __future__ import annotations

import math

import pytest

from precdx.collectors.logs import series as series_mod

N = 6000          # logged iterations per run
LIMIT = 1000      # threshold used in the test (windows <= LIMIT / 8)
DIVERGE = 4000    # target drifts away from here


def _loss(s: int, target: bool) -> float:
    base = 8.0 * math.exp(-s / 3000.0) + 2.0
    if target and s >= DIVERGE:
        base *= 1.0 + 0.05 * (s - DIVERGE) / 500.0
    return base


def _line(s: int, target: bool) -> str:
    loss = f"lm loss: {_loss(s, target):.6E} | "
    skipped = 0
    nan = 0
    gn = f"{1.0 + 0.1 * math.sin(s / 50.0):.3f}"
    if target and s in (2500, 2501, 5100):
        loss, gn, nan = "", "nan", 1        # NaN drops the loss key
    if s % 997 == 0:
        skipped = 1
    return (f" [2025-03-24 17:50:01.123456] iteration {s:8d}/{N:8d} | consumed samples: {8 * s:12d} | "
            f"elapsed time per iteration (ms): 61.3 | learning rate: 1.000000E-04 | global batch size: "
            f"{8:5d} | {loss}loss scale: {65536.0 if s < 3000 else 32768.0} | grad norm: {gn} | "
            f"number of skipped iterations: {skipped:3d} | number of nan iterations: {nan:3d} |")


def _facts(kit, tmp_path, monkeypatch, limit):
    if limit is None:
        monkeypatch.delenv("PRECDX_LOG_MAX_POINTS", raising=False)
    else:
        monkeypatch.setenv("PRECDX_LOG_MAX_POINTS", str(limit))
    case = kit.two_runs(tmp_path / str(limit), [_line(s, False) for s in range(1, N + 1)],
                        [_line(s, True) for s in range(1, N + 1)])
    facts, _ = kit.collect(case)
    return facts


@pytest.fixture
def both(kit, tmp_path, monkeypatch):
    return _facts(kit, tmp_path, monkeypatch, None), _facts(kit, tmp_path, monkeypatch, LIMIT)


@pytest.mark.slow  # collects two long logs twice, with and without folding
def test_series_facts_exact_or_window_granular(kit, both):
    full, folded = both
    for role in ("baseline", "target"):
        a, b = kit.one(full, "loss_series", role=role), kit.one(folded, "loss_series", role=role)
        for k in ("n_points", "first_step", "last_step", "nan_count", "skipped_count", "restarts",
                  "log_interval", "has_grad_norm", "has_loss_scale"):
            assert getattr(a, k) == getattr(b, k), (role, k)
        assert b.min_loss == pytest.approx(a.min_loss, rel=1e-12)
        if a.first_nan_step is not None:  # resolved to the window holding it
            assert a.first_nan_step <= b.first_nan_step < a.first_nan_step + N // (LIMIT // 8) * 2
        sa, sb = kit.one(full, "loss_scale_trend", role=role), kit.one(folded, "loss_scale_trend", role=role)
        for k in ("trend", "first", "last", "min", "max", "collapsed"):
            assert getattr(sa, k) == getattr(sb, k), (role, k)


@pytest.mark.slow  # collects two long logs twice, with and without folding
def test_compare_facts_within_tolerance(kit, both):
    full, folded = both
    a, b = kit.one(full, "loss_compare"), kit.one(folded, "loss_compare")
    window = 2 * N // (LIMIT // 8)  # k never exceeds twice points / max windows
    assert a.first_divergence_step is not None and b.first_divergence_step is not None
    assert abs(a.first_divergence_step - b.first_divergence_step) <= window
    assert b.mean_rel_err == pytest.approx(a.mean_rel_err, rel=0.05)
    # over the last 10 windows instead of the last 10 steps; the max of window means: documented
    # as window-level approximations, so only their order of magnitude is held here
    assert 0.5 * a.final_rel_err <= b.final_rel_err <= a.final_rel_err * 1.0001
    assert math.isnan(a.max_rel_err) == math.isnan(b.max_rel_err)  # NaN points propagate to windows
    assert b.drift_slope == pytest.approx(a.drift_slope, rel=0.05)
    na, nb = kit.one(full, "nan_compare"), kit.one(folded, "nan_compare")
    for k in ("target_skipped_count", "baseline_skipped_count"):
        assert getattr(na, k) == getattr(nb, k)


def test_stored_points_stay_bounded(monkeypatch):
    monkeypatch.setenv("PRECDX_LOG_MAX_POINTS", "1024")  # k stays < 1024 below 1024^2 / 8 points
    from precdx.collectors.logs.model import Record
    b = series_mod.SeriesBuilder("r", "target")
    peak = 0
    for s in range(1, 50_001):
        b.add(Record(line=s, kind="train", framework="megatron", step=s, loss=1.0 + 1.0 / s, grad_norm=1.0))
        c = b._cols["megatron"]
        peak = max(peak, c.n_buffered, len(c.windows) if c.windows is not None else 0)
    s = b.build()
    assert peak <= 1024 + 1
    assert len(s.steps) <= 1024 // series_mod.FOLD
    assert s.n_points == 50_000 and s.first_step == 1 and int(s.steps[-1]) == 50_000
    assert s.min_loss == pytest.approx(1.0 + 1.0 / 50_000)


@pytest.mark.slow  # collects two long logs twice, with and without folding
def test_below_threshold_unchanged(kit, tmp_path, monkeypatch):
    monkeypatch.setenv("PRECDX_LOG_MAX_POINTS", str(N + 10))
    a = _facts(kit, tmp_path, monkeypatch, N + 10)
    b = _facts(kit, tmp_path, monkeypatch, None)
    def plain(facts):
        return [{k: v for k, v in f.model_dump().items() if k != "source"} for f in facts]
    assert repr(plain(a)) == repr(plain(b))  # repr: NaN equals NaN


def test_restart_after_folding(monkeypatch):
    """Re-logged steps supersede folded windows: steps stay sorted and unique, restarts count once."""
    from precdx.collectors.logs.model import Record
    monkeypatch.setenv("PRECDX_LOG_MAX_POINTS", "100")
    b = series_mod.SeriesBuilder("r", "target")
    steps = list(range(1, 2001)) + list(range(1500, 3001))
    for i, s in enumerate(steps):
        b.add(Record(line=i, kind="train", framework="megatron", step=s, loss=1.0 + s * 1e-4))
    s = b.build()
    assert s.windows is not None and s.restarts == 1 and s.duplicate_lines == 0
    assert bool((s.steps[1:] > s.steps[:-1]).all())
    assert s.first_step == 1 and int(s.steps[-1]) == 3000
    assert 3000 - 2 * 2000 // (100 // series_mod.FOLD) <= s.n_points <= 3000
