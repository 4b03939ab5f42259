"""The fast near-miss search equals its reference form on random rule packs (joins with scale,
`any`, `none` joined to bound aliases, regexes, NaN/Inf, missing fields, int/float/bool values
that compare equal or not) and on hand-picked relaxations."""
from __future__ import annotations

import random
from collections import Counter

from precdx.matching.python_engine import PythonMatcher, near_misses, near_misses_reference
from tests.matching.test_durable_differential import _generate, random_fact
from tests.matching.vocab import facts, make_pack

SEED = 7031
CASES = 200


def test_random_packs_near_misses_match_the_reference():
    rng = random.Random(SEED)
    used: Counter = Counter()
    kinds: Counter = Counter()
    for case in range(CASES):
        pack = _generate(rng, used)
        fs = facts(*(random_fact(rng) for _ in range(rng.randint(0, 24))))
        fired = {f.rule_id for f in PythonMatcher(pack).run(fs)}
        # also with nothing fired: every rule is searched, the fired ones included
        for fired_set in (fired, set()):
            got = near_misses(pack, fs, fired_set)
            assert got == near_misses_reference(pack, fs, fired_set), \
                f"case {case}: {[r.rule.when.model_dump(by_alias=True) for r in pack.rules]}\n{[f.to_json() for f in fs]}"
            kinds.update(nm.kind for nm in got)
    assert kinds["condition"] >= 50 and kinds["blocked_by"] >= 5 and kinds["missing_fact"] >= 1, kinds


def test_equality_join_keeps_kinds_apart():
    """1 == 1.0 joins; True never joins 1 (the hashed join keeps `_same_kind`)."""
    pack = make_pack({"all": [{"fact": "tdx_alpha", "as": "a", "where": {"b": True}},
                              {"fact": "tdx_beta", "where": {"n": {"eq": {"ref": "a.x"}}, "s": "z"}}]},
                     {"all": [{"fact": "tdx_alpha", "as": "a", "where": {"s": "q"}},
                              {"fact": "tdx_alpha", "where": {"b": {"eq": {"ref": "a.b"}}, "x": 9.0}}]})
    fs = facts({"type": "tdx_alpha", "b": True, "x": 1.0}, {"type": "tdx_beta", "n": 1, "s": "y"},
               {"type": "tdx_alpha", "s": "q", "b": True}, {"type": "tdx_alpha", "b": 1 == 1, "x": 2.0})
    got = near_misses(pack, fs, set())
    assert got == near_misses_reference(pack, fs, set())
    assert [nm.rule_id for nm in got] == ["TDX-001", "TDX-002"]
    assert "s == 'z'" in got[0].missing and "x == 9.0" in got[1].missing


def test_negative_joined_to_a_bound_alias_blocks():
    pack = make_pack({"all": [{"fact": "tdx_alpha", "as": "a", "where": {"x": {"gt": 0.0}}}],
                      "none": [{"fact": "tdx_beta", "where": {"n": {"eq": {"ref": "a.n"}}}}]})
    fs = facts({"type": "tdx_alpha", "x": 1.0, "n": 3}, {"type": "tdx_beta", "n": 3})
    got = near_misses(pack, fs, set())
    assert got == near_misses_reference(pack, fs, set())
    assert got and got[0].kind == "blocked_by"
    fs2 = facts({"type": "tdx_alpha", "x": 1.0, "n": 3}, {"type": "tdx_beta", "n": 4})
    assert near_misses(pack, fs2, set()) == near_misses_reference(pack, fs2, set())
