"""find_spikes computes its running medians in blocks of windows; it must find exactly what the
plain per-point definition finds (same spikes, same recoveries), NaN/Inf and block edges included."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from precdx.collectors.logs.compare import EPS, SPIKE_LOOKBACK, SPIKE_RECOVERY, Spikes, _spike_candidates, find_spikes


def _per_point(steps: np.ndarray, values: np.ndarray, rel_jump: float = 0.10, z: float = 6.0) -> Spikes:
    out, recovered, n, i = [], 0, values.size, SPIKE_LOOKBACK
    while i < n:
        prev = values[i - SPIKE_LOOKBACK:i]
        prev = prev[np.isfinite(prev)]
        v = values[i]
        if prev.size >= 3 and np.isfinite(v):
            med = float(np.median(prev))
            mad = float(np.median(np.abs(prev - med))) * 1.4826
            if v > med * (1 + rel_jump) and v - med > z * max(mad, EPS * max(abs(med), 1.0)):
                out.append(int(steps[i]))
                after = values[i + 1:i + 1 + SPIKE_RECOVERY]
                if np.any(np.isfinite(after) & (after <= med * (1 + rel_jump / 2))):
                    recovered += 1
                i += 1
                while i < n and np.isfinite(values[i]) and values[i] > med * (1 + rel_jump):
                    i += 1
                continue
        i += 1
    return Spikes(out, recovered)


points = st.one_of(st.floats(2.4, 2.6), st.sampled_from([np.nan, np.inf, -np.inf, 0.0, 5.0, 10.0, 2.5]))


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(st.lists(points, max_size=120))
def test_same_spikes_as_the_per_point_definition(values: list[float]) -> None:
    v = np.array(values, dtype=np.float64)
    steps = np.arange(1, v.size + 1)
    assert find_spikes(steps, v) == _per_point(steps, v)


def test_block_edges() -> None:
    rng = np.random.default_rng(7)
    v = 2.5 + rng.normal(0, 0.01, 5000)
    v[[10, 63, 64, 65, 127, 128, 2000, 4999]] = 9.0
    v[300:320] = np.nan
    steps = np.arange(v.size)
    small_idx, small_med = _spike_candidates(v, 0.10, 6.0, block=64)
    idx, med = _spike_candidates(v, 0.10, 6.0)
    assert small_idx.tolist() == idx.tolist() and np.array_equal(small_med, med)
    assert set(idx.tolist()) >= {63, 127, 128, 2000, 4999}
    assert find_spikes(steps, v) == _per_point(steps, v)
