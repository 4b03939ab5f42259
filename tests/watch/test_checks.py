"""The watcher's checks on hand-made points (pure Python, no torch)."""
from __future__ import annotations

import math

from precdx.watch.checks import Checker, Point, Reference, RefPoint, print_resolution, sig_digits


def ref(rows, **kw):
    return Reference.from_points("baseline", [(s, RefPoint(loss=l, grad_norm=g, lr=1e-3, loss_scale=None,
                                                           nonfinite=bad)) for s, l, g, bad in rows], **kw)


def checks(c, *points):
    return [b.check for p in points for b in c.observe(p)]


def test_first_step_needs_both_abs_and_rel():
    r = ref([(1, 10.0, 1.0, False), (2, 0.2, 1.0, False)])
    assert checks(Checker([r]), Point(1, 10.04, 1.0, 1e-3)) == []            # rel 0.4% < 0.5%
    r2 = ref([(1, 0.5, 1.0, False)])
    assert checks(Checker([r2]), Point(1, 0.504, 1.0, 1e-3)) == []           # abs 0.004 < 0.005
    assert checks(Checker([r2]), Point(1, 0.51, 1.0, 1e-3)) == ["first_step_loss", "loss_mean"]


def test_sustained_mean_and_grad_norm():
    r = ref([(s, 2.0, 1.0, False) for s in range(1, 8)])
    c = Checker([r])
    found = checks(c, Point(1, 2.0, 1.0, 1e-3), *(Point(s, 2.0 * 1.008, 1.05, 1e-3) for s in range(2, 8)))
    assert found == []                                                       # 0.8% and 5%: within
    c = Checker([r])
    found = checks(c, Point(1, 2.0, 1.0, 1e-3), *(Point(s, 2.0 * 1.018, 1.0, 1e-3) for s in range(2, 4)))
    assert found == ["loss_mean"]                                            # mean of 0, 1.8, 1.8% at step 3
    c = Checker([r])
    assert checks(c, Point(1, 2.0, 1.0, 1e-3), Point(2, 2.0, 1.25, 1e-3)) == ["grad_norm_mean"]


def test_nonfinite_more_often_than_reference_and_lr():
    r = ref([(1, 2.0, 1.0, False), (2, math.nan, math.inf, True), (3, 2.0, 1.0, False)])
    c = Checker([r])
    assert checks(c, Point(1, 2.0, 1.0, 1e-3), Point(2, 2.0, math.inf, 1e-3, skipped=True)) == []  # mirrored
    assert checks(c, Point(3, math.nan, 1.0, 1e-3)) == ["nonfinite"]
    assert checks(Checker([r]), Point(1, 2.0, 1.0, 2e-3)) == ["lr_mismatch"]


def test_rerun_reference_to_printed_precision():
    r = ref([(1, 3.957357, 0.9, False)], exact=True)
    assert r.digits == 7 and sig_digits(3.957357) == 7
    assert checks(Checker([r]), Point(1, 3.9573574, 0.9, 1e-3)) == []       # rounds to the printed value
    assert checks(Checker([r]), Point(1, 3.9573576, 0.9, 1e-3)) == ["rerun_differs"]
    assert math.isclose(print_resolution(3.957357, 7), 5e-7)


def test_sanity_without_reference():
    c = Checker([])
    assert checks(c, *(Point(s, 2.0, 1.0) for s in range(1, 7))) == []
    assert checks(c, Point(7, 2.0, 12.0)) == ["grad_norm_explosion"]
    assert checks(Checker([]), Point(1, math.nan, 1.0)) == ["nonfinite"]
    assert checks(Checker([]), Point(1, 2.0, math.inf, loss_scale=1024.0)) == []   # an overflow skip
    c = Checker([])
    assert checks(c, Point(1, 2.0, 1.0, loss_scale=65536.0), Point(2, 2.0, 1.0, loss_scale=4096.0)) \
        == ["loss_scale_collapse"]


def test_explosion_mirrored_by_reference_is_not_a_breach():
    rows = [(s, 2.0, 1.0, False) for s in range(1, 7)] + [(7, 2.0, 15.0, False)]
    c = Checker([ref(rows)])
    for s in range(1, 7):
        c.observe(Point(s, 2.0, 1.0, 1e-3))
    assert "grad_norm_explosion" not in checks(c, Point(7, 2.0, 15.0, 1e-3))
