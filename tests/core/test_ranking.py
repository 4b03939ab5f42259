"""The scoring function on its own: bounds, monotonicity, contradiction, deterministic ties."""
import math

from precdx.ranking import firing_weight, noisy_or, rank, specificity, strength


def test_specificity_grows_with_conditions_and_stays_below_one():
    vals = [specificity(n) for n in range(1, 12)]
    assert all(a < b for a, b in zip(vals, vals[1:]))
    assert 0.6 < vals[0] < 0.7 and vals[-1] < 1.0


def test_strength_maps_low_high_to_half_one_and_clips():
    assert strength(0.01, 0.01, 0.1) == 0.5
    assert strength(0.1, 0.01, 0.1) == 1.0
    assert strength(5.0, 0.01, 0.1) == 1.0
    assert strength(0.0, 0.01, 0.1) == 0.5
    assert 0.5 < strength(0.05, 0.01, 0.1) < 1.0
    assert math.isclose(strength(0.1, 0.01, 1.0, log=True), 0.75)
    assert strength(float("nan"), 0.01, 0.1) == 1.0
    assert strength(None, 0.01, 0.1) == 0.75


def test_weight_is_a_product_in_unit_interval():
    assert firing_weight(0.8, 1.0, 0.5) == 0.4
    assert firing_weight(1.0, 1.0, 1.0) == 1.0


def test_noisy_or():
    assert noisy_or([]) == 0.0
    assert math.isclose(noisy_or([0.5, 0.5]), 0.75)


def test_rank_combines_support_and_contradiction():
    ranked = rank([("a", "R1", 0.6, True), ("a", "R2", 0.5, True), ("b", "R3", 0.7, True),
                   ("b", "R4", 0.5, False)])
    scores = {m.mode: m.score for m in ranked}
    assert math.isclose(scores["a"], 0.8, abs_tol=1e-4)
    assert math.isclose(scores["b"], 0.35, abs_tol=1e-4)
    assert [m.mode for m in ranked] == ["a", "b"]


def test_repeated_firings_of_one_rule_are_not_independent():
    once = rank([("a", "R1", 0.6, True)])[0].score
    many = rank([("a", "R1", 0.6, True)] * 5)[0].score
    assert once == many == 0.6


def test_ties_break_deterministically():
    contrib = [("z.mode", "R1", 0.5, True), ("a.mode", "R2", 0.5, True)]
    assert [m.mode for m in rank(contrib)] == ["a.mode", "z.mode"]
    assert [m.mode for m in rank(list(reversed(contrib)))] == ["a.mode", "z.mode"]
    # equal score, stronger single evidence wins
    r = rank([("x", "R1", 0.75, True), ("y", "R2", 0.5, True), ("y", "R3", 0.5, True)])
    assert r[0].score == r[1].score and r[0].mode == "x"
