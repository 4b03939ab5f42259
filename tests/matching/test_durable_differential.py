"""Differential test: the durable back end returns exactly the firings of the Python reference,
on random rule packs (built through the real rule schema and compiler) over random facts, and
on hand-picked cases around the engine's known traps."""
from __future__ import annotations

import math
import random
from collections import Counter
from typing import Any

import pytest

from precdx.matching.base import Firing
from precdx.matching.durable_engine import DurableMatcher
from precdx.matching.python_engine import PythonMatcher
from tests.matching.vocab import facts, make_pack

CASES = 240
SEED = 20240611
MAX_FACTS = 30  # enough to reach joins of 3-4 patterns and hash-collision paths

NUMS = [0.0, -0.0, 1.0, 2.0, 0.5, 3.0, -3.0, 1e-05, 2e-05, 1.5e-07, 1e16, 0.1 + 0.2, 0.3]
NONFINITE = [math.nan, math.inf, -math.inf]
INTS = [0, 1, 2, 3, -1]
STRS = ["a", "b", "ab", "abc", 'a"b', "a\\b", "é", "", "x1"]
REGEXES = ["a.*", "ab?", "[ab]+", "é|x1", '.*"b', r"a\\b"]
SCALES = [2, 0.5, 1e-05, -1, 1]
FIELDS = {  # fact type -> field -> kind
    "tdx_alpha": {"x": "num", "y": "num", "n": "int", "s": "str", "b": "bool"},
    "tdx_beta": {"x": "num", "n": "int", "s": "str", "k": "choice"},
}
CHOICES = ["p", "q", "r"]


def _literal(rng: random.Random, kind: str) -> Any:
    if kind == "num":
        return rng.choice(NUMS + [math.inf] if rng.random() < 0.05 else NUMS)
    if kind == "int":
        return rng.choice(INTS)
    if kind == "str":
        return rng.choice(STRS)
    if kind == "bool":
        return rng.choice([True, False])
    return rng.choice(CHOICES)


def _numeric(kind: str) -> bool:
    return kind in ("num", "int")


def _condition(rng: random.Random, ftype: str, field: str, bound: dict[str, str],
               used: Counter) -> Any:
    kind = FIELDS[ftype][field]
    # joins: to an earlier alias's field of a compatible kind
    partners = [(a, f) for a, t in bound.items() for f, k in FIELDS[t].items()
                if (_numeric(k) and _numeric(kind)) or (k == kind and kind in ("str", "bool", "choice"))]
    roll = rng.random()
    if partners and roll < 0.3:
        alias, rfield = rng.choice(partners)
        ops = ["eq", "ne", "lt", "le", "gt", "ge"] if _numeric(kind) else ["eq", "ne"]
        ref: dict[str, Any] = {"ref": f"{alias}.{rfield}"}
        if _numeric(kind) and rng.random() < 0.4:
            ref["scale"] = rng.choice(SCALES)
            used["scale"] += 1
        used["join"] += 1
        return {rng.choice(ops): ref}
    ops = ["eq", "ne", "in", "not_in", "exists"]
    if _numeric(kind):
        ops += ["lt", "le", "gt", "ge", "nonfinite", "lt", "gt"]
    if kind == "str":
        ops += ["matches", "matches"]
    op = rng.choice(ops)
    used[op] += 1
    if op in ("exists", "nonfinite"):
        return {op: rng.choice([True, False])}
    if op == "matches":
        return {op: rng.choice(REGEXES)}
    if op in ("in", "not_in"):
        return {op: [_literal(rng, kind) for _ in range(rng.randint(1, 3))]}
    if op == "eq" and rng.random() < 0.5:
        return _literal(rng, kind)  # bare scalar: equality
    return {op: _literal(rng, kind)}


def _pattern(rng: random.Random, alias: str | None, bound: dict[str, str], used: Counter) -> dict:
    ftype = rng.choice(list(FIELDS))
    where = {}
    for field in rng.sample(list(FIELDS[ftype]), rng.randint(0, 3)):
        where[field] = _condition(rng, ftype, field, bound, used)
    pat: dict[str, Any] = {"fact": ftype, "where": where}
    if alias:
        pat["as"] = alias
    return pat


def random_when(rng: random.Random, used: Counter) -> dict:
    bound: dict[str, str] = {}
    when: dict[str, list] = {"all": []}
    for i in range(rng.randint(1, 3)):
        pat = _pattern(rng, f"a{i}", bound, used)
        bound[f"a{i}"] = pat["fact"]
        when["all"].append(pat)
    if rng.random() < 0.35:
        when["any"] = [_pattern(rng, "alt", bound, used) for _ in range(rng.randint(1, 3))]
        used["any"] += 1
    if rng.random() < 0.5:
        when["none"] = [_pattern(rng, None, bound, used) for _ in range(rng.randint(1, 2))]
        used["none"] += 1
    return when


def random_fact(rng: random.Random) -> dict:
    ftype = rng.choice(list(FIELDS))
    d: dict[str, Any] = {"type": ftype}
    for field, kind in FIELDS[ftype].items():
        if rng.random() < 0.25:
            continue  # missing field
        if kind == "num":
            d[field] = rng.choice(NUMS + NONFINITE) if rng.random() < 0.8 else rng.choice(NONFINITE)
        elif kind == "int":
            d[field] = rng.choice(INTS)
        elif kind == "str":
            d[field] = rng.choice(STRS)
        elif kind == "bool":
            d[field] = rng.choice([True, False])
        else:
            d[field] = rng.choice(CHOICES)
    return d


def _generate(rng: random.Random, used: Counter):
    """A compiled pack of 1-3 random rules (regenerated until the compiler accepts it)."""
    while True:
        whens = [random_when(rng, used) for _ in range(rng.randint(1, 3))]
        try:
            return make_pack(*whens)
        except Exception as exc:  # noqa: BLE001 - e.g. a duplicate alias the generator made
            used["rejected"] += 1
            if "PrecdxError" not in type(exc).__name__:
                raise


@pytest.mark.slow  # random packs and facts, like the fuzz tests (the rule cases run both engines in the fast lane)
def test_random_packs_match_the_reference():
    rng = random.Random(SEED)
    used: Counter = Counter()
    fired_cases = 0
    firings = 0
    for case in range(CASES):
        pack = _generate(rng, used)
        durable, python = DurableMatcher(pack), PythonMatcher(pack)
        try:
            for _ in range(3):  # the same matcher serves several requests
                fs = facts(*(random_fact(rng) for _ in range(rng.randint(0, MAX_FACTS))))
                expected = python.run(fs)
                got = durable.run(fs)
                assert got == expected, f"case {case}: pack rules {[r.rule.when.model_dump(by_alias=True) for r in pack.rules]}\nfacts {[f.to_json() for f in fs]}"
                fired_cases += bool(expected)
                firings += len(expected)
                # order of facts never changes the result (negation is order-independent)
                perm = list(range(len(fs)))
                rng.shuffle(perm)
                again = durable.run([fs[i] for i in perm])
                assert sorted(_rebind(f, perm) for f in again) == expected
        finally:
            durable.close()
    # the generator really exercised every feature, and the cases were not vacuous
    for feature in ("join", "scale", "in", "not_in", "exists", "nonfinite", "matches", "ne",
                    "any", "none", "lt", "gt"):
        assert used[feature] >= 10, (feature, used)
    assert fired_cases >= CASES // 3 and firings >= CASES, (fired_cases, firings)


def _rebind(firing: Firing, perm: list[int]) -> Firing:
    """A firing over permuted facts, in terms of the original fact indices."""
    return Firing(firing.rule_id, firing.alternative,
                  tuple(sorted((alias, perm[i]) for alias, i in firing.bindings)))


# ---------------------------------------------------------------- hand-picked traps
def _same(pack, fs) -> list:
    durable = DurableMatcher(pack)
    try:
        got = durable.run(fs)
        assert got == PythonMatcher(pack).run(fs)
        return got
    finally:
        durable.close()


def test_ne_and_not_in_on_missing_or_nonfinite_fields_are_false():
    pack = make_pack({"all": [{"fact": "tdx_alpha", "where": {"x": {"ne": 1.0}}}]},
                     {"all": [{"fact": "tdx_alpha", "where": {"s": {"not_in": ["a"]}}}]},
                     {"all": [{"fact": "tdx_alpha", "where": {"x": {"not_in": [1.0]}}}]})
    fs = facts({"type": "tdx_alpha"}, {"type": "tdx_alpha", "x": "nan"}, {"type": "tdx_alpha", "x": "-inf"},
               {"type": "tdx_alpha", "x": 2.0, "s": "b"})
    got = _same(pack, fs)
    assert {(f.rule_id, f.bindings[0][1]) for f in got} == {("TDX-001", 3), ("TDX-002", 3), ("TDX-003", 3)}


def test_exponent_thresholds_and_values():
    # Python writes these as 1e-05 / 1e+16, which the engine's JSON parser rejects
    pack = make_pack({"all": [{"fact": "tdx_alpha", "where": {"x": {"gt": 1e-05, "lt": 1e16}}}]},
                     {"all": [{"fact": "tdx_alpha", "as": "a", "where": {"x": {"gt": 0.0}}},
                              {"fact": "tdx_beta", "where": {"x": {"ge": {"ref": "a.x", "scale": 1e-05}}}}]})
    alphas = [1e-05, math.nextafter(1e-05, 1.0), 2e-05, 1e16]
    betas = [2e-10, 1.5e-10, 1e-10]
    fs = facts(*({"type": "tdx_alpha", "x": v} for v in alphas), *({"type": "tdx_beta", "x": v} for v in betas))
    got = _same(pack, fs)
    assert [f.bindings for f in got if f.rule_id == "TDX-001"] == [(("_p0", 1),), (("_p0", 2),)]
    joined = sum(1 for a in alphas for b in betas if b >= a * 1e-05)
    assert joined >= 4 and len([f for f in got if f.rule_id == "TDX-002"]) == joined


def test_none_with_the_same_type_positive_is_order_independent():
    pack = make_pack({"all": [{"fact": "tdx_alpha", "as": "a", "where": {"x": {"gt": 0.0}}}],
                      "none": [{"fact": "tdx_alpha", "where": {"x": {"gt": {"ref": "a.x"}}}}]})
    rows = [{"type": "tdx_alpha", "x": v} for v in (1.0, 3.0, 2.0)]
    for order in ([0, 1, 2], [2, 1, 0], [1, 0, 2]):
        got = _same(pack, facts(*(rows[i] for i in order)))
        assert [f.bindings for f in got] == [(("a", order.index(1)),)]  # only the largest


def test_negative_join_to_a_missing_or_nonfinite_field_does_not_block():
    # a.x missing or NaN: the join in the none-pattern is false, so nothing is negated
    pack = make_pack({"all": [{"fact": "tdx_alpha", "as": "a", "where": {"s": "a"}}],
                      "none": [{"fact": "tdx_beta", "where": {"x": {"le": {"ref": "a.x", "scale": 2}}}}]})
    fs = facts({"type": "tdx_beta", "x": 0.0}, {"type": "tdx_alpha", "s": "a"},
               {"type": "tdx_alpha", "s": "a", "x": "nan"}, {"type": "tdx_alpha", "s": "a", "x": 1.0},
               {"type": "tdx_alpha", "s": "a", "x": -1.0})
    got = _same(pack, fs)
    assert [f.bindings[0][1] for f in got] == [1, 2, 4]


def test_join_of_an_integer_with_an_equal_double():
    # the engine's beta nodes say 1 != 1.0; the back end sends every number as a double
    pack = make_pack({"all": [{"fact": "tdx_alpha", "as": "a", "where": {"n": {"exists": True}}},
                              {"fact": "tdx_beta", "where": {"x": {"eq": {"ref": "a.n"}}}}]})
    got = _same(pack, facts({"type": "tdx_alpha", "n": 1}, {"type": "tdx_beta", "x": 1.0}))
    assert len(got) == 1


def test_equality_joins_across_signed_zeros():
    # the engine pairs equality joins by the "%f" text of both sides: "-0.000000" != "0.000000"
    pack = make_pack({"all": [{"fact": "tdx_alpha", "as": "a"},
                              {"fact": "tdx_beta", "where": {"x": {"eq": {"ref": "a.x"}}}}]},
                     {"all": [{"fact": "tdx_alpha", "as": "a"},
                              {"fact": "tdx_beta", "where": {"x": {"eq": {"ref": "a.y", "scale": -1}}}}]})
    fs = facts({"type": "tdx_alpha", "x": -0.0, "y": 0.0}, {"type": "tdx_beta", "x": 0.0},
               {"type": "tdx_beta", "x": -0.0})
    got = _same(pack, fs)
    assert len([f for f in got if f.rule_id == "TDX-001"]) == 2
    assert len([f for f in got if f.rule_id == "TDX-002"]) == 2


def test_strings_with_quotes_backslashes_and_unicode():
    pack = make_pack({"all": [{"fact": "tdx_alpha", "as": "a", "where": {"s": {"in": ['a"b', "a\\b", "é"]}}},
                              {"fact": "tdx_beta", "where": {"s": {"eq": {"ref": "a.s"}}}}]},
                     {"all": [{"fact": "tdx_alpha", "where": {"s": {"matches": "a.b"}}}]})
    fs = facts(*({"type": t, "s": s} for t in ("tdx_alpha", "tdx_beta") for s in ('a"b', "a\\b", "é", "ab")))
    got = _same(pack, fs)
    assert len([f for f in got if f.rule_id == "TDX-001"]) == 3
    assert len([f for f in got if f.rule_id == "TDX-002"]) == 2


def test_any_alternatives_fire_separately_without_merged_frames():
    pack = make_pack({"all": [{"fact": "tdx_alpha", "as": "a"}],
                      "any": [{"fact": "tdx_beta", "as": "b", "where": {"k": "p"}},
                              {"fact": "tdx_beta", "as": "c", "where": {"n": {"ge": 1}}}]})
    got = _same(pack, facts({"type": "tdx_alpha"}, {"type": "tdx_beta", "k": "p", "n": 2}))
    assert [(f.alternative, f.bindings) for f in got] == [(0, (("a", 0), ("b", 1))), (1, (("a", 0), ("c", 1)))]


@pytest.mark.parametrize("n_facts", [0, 1, 300])
def test_identical_facts_stay_distinct(n_facts):
    pack = make_pack({"all": [{"fact": "tdx_alpha", "as": "a"}, {"fact": "tdx_alpha", "as": "b"}]})
    got = _same(pack, facts(*([{"type": "tdx_alpha", "x": 1.0}] * min(n_facts, 30))))
    m = min(n_facts, 30)
    assert len(got) == m * (m - 1)
