"""Engine limits and engine failures of the durable back end surface as PrecdxError naming the
rule (never a crash), rule packs beyond one ruleset's alpha capacity are sharded, and a session
whose cleanup failed is never touched again."""
from __future__ import annotations

import dataclasses

import pytest

import precdx.matching.durable_engine as durable_engine
from precdx.errors import PrecdxError
from precdx.facts.base import F, Fact, Num
from precdx.matching.durable_engine import DurableMatcher
from precdx.matching.python_engine import PythonMatcher
from precdx.rulepack.compiler import Alternative, PatternIR
from precdx.rulepack.compiler import Test as IRTest
from tests.matching.vocab import facts, make_pack, register_types, unregister_types


def _with_alternative(pack, alt: Alternative, **changes):
    rule = dataclasses.replace(pack.rules[0], alternatives=(alt,), **changes)
    return dataclasses.replace(pack, rules=[rule])


def _base():
    return make_pack({"all": [{"fact": "tdx_alpha", "as": "a", "where": {"x": {"gt": 0.0}}}]})


def test_too_many_patterns_names_the_rule():
    pack = _base()
    pats = tuple(PatternIR(f"p{i}", "tdx_alpha", ()) for i in range(17))
    with pytest.raises(PrecdxError, match=r"rule TDX-001: 17 patterns; the engine allows 16"):
        DurableMatcher(_with_alternative(pack, Alternative(pats, ())))


def test_priority_out_of_range_names_the_rule():
    pack = _base()
    with pytest.raises(PrecdxError, match=r"rule TDX-001: priority 70000 outside 0\.\.65534"):
        DurableMatcher(_with_alternative(pack, pack.rules[0].alternatives[0], priority=70000))


def test_too_many_joins_in_one_pattern_names_the_rule():
    pack = _base()
    joins = tuple(IRTest("x", "ge", ref=("a", "x"), scale=float(i)) for i in range(29))
    alt = Alternative((PatternIR("a", "tdx_alpha", ()), PatternIR("b", "tdx_alpha", joins)), ())
    with pytest.raises(PrecdxError, match=r"rule TDX-001: pattern 'b': 29 joins"):
        DurableMatcher(_with_alternative(pack, alt))


def test_integer_literal_beyond_exact_doubles_names_the_rule():
    pack = make_pack({"all": [{"fact": "tdx_alpha", "where": {"n": {"gt": 2 ** 60}}}]})
    with pytest.raises(PrecdxError, match=r"rule TDX-001: .*too large"):
        DurableMatcher(pack)


def test_too_many_case_splits_for_negative_joins_names_the_rule():
    where = {f: {"eq": {"ref": f"a.{f}"}, "ne": {"ref": f"c.{f}"}} for f in ("x", "y", "n", "s")}
    pack = make_pack({"all": [{"fact": "tdx_alpha", "as": "a"}, {"fact": "tdx_alpha", "as": "c"}],
                      "none": [{"fact": "tdx_alpha", "where": where}]})
    with pytest.raises(PrecdxError, match=r"rule TDX-001: 'none' patterns join 8 fields"):
        DurableMatcher(pack)


def _thresholds(n: int):
    return make_pack(*({"all": [{"fact": "tdx_alpha", "where": {"x": {"gt": float(i)}}}]} for i in range(n)))


def test_a_rule_beyond_the_alpha_budget_names_the_rule():
    pack = make_pack({"all": [{"fact": "tdx_alpha", "where": {"x": {"gt": 1.0}}},
                              {"fact": "tdx_alpha", "where": {"y": {"gt": 1.0}}},
                              {"fact": "tdx_alpha", "where": {"n": {"gt": 1}}}]})
    with pytest.raises(PrecdxError, match=r"rule TDX-001: a tdx_alpha fact could satisfy 3 alpha conditions"):
        DurableMatcher(pack, alpha_budget=2)


def test_wide_packs_are_sharded_and_still_agree_with_the_reference():
    pack = _thresholds(150)  # one fact above every threshold would overflow one ruleset (error 303)
    m = DurableMatcher(pack)
    try:
        assert m.shard_count >= 3
        fs = facts({"type": "tdx_alpha", "x": 1000.0}, {"type": "tdx_alpha", "x": 75.5}, {"type": "tdx_alpha"})
        got = m.run(fs)
        assert got == PythonMatcher(pack).run(fs) and len(got) == 150 + 76
    finally:
        m.close()


def test_engine_error_at_run_time_is_a_precdx_error_and_the_matcher_recovers():
    pack = _thresholds(70)
    m = DurableMatcher(pack, alpha_budget=1000)  # model check disabled: the engine itself fails
    try:
        assert m.shard_count == 1
        with pytest.raises(PrecdxError, match=r"error 303"):
            m.run(facts({"type": "tdx_alpha", "x": 1000.0}))
        fs = facts({"type": "tdx_alpha", "x": 10.5})
        assert m.run(fs) == PythonMatcher(pack).run(fs) != []
        assert m.live_sessions() == 0 and m.retired_sessions() == 0
    finally:
        m.close()


class _FailingDelete:
    """The C module, except that `delete_state` fails once."""

    def __init__(self, real) -> None:
        self._real = real
        self.failed: list[str] = []

    def __getattr__(self, name):
        return getattr(self._real, name)

    def delete_state(self, handle, sid):
        if not self.failed:
            self.failed.append(sid)
            raise self._real.error("Could not delete state, error code: 101")
        return self._real.delete_state(handle, sid)


def test_a_session_whose_cleanup_failed_is_never_reused(monkeypatch):
    pack = _base()
    m = DurableMatcher(pack)
    fake = _FailingDelete(durable_engine._engine)
    monkeypatch.setattr(durable_engine, "_engine", fake)
    fs = facts({"type": "tdx_alpha", "x": 1.0})
    with pytest.raises(PrecdxError, match=r"could not delete a session"):
        m.run(fs)
    assert m.retired_sessions() == 1 and m.live_sessions() == 1  # left alone in the engine
    for _ in range(3):
        assert m.run(fs) == PythonMatcher(pack).run(fs)
    assert m.live_sessions() == 1 and fake.failed == ["s0"]
    m.close()  # keeps the ruleset (deleting it would free the abandoned session)
    with pytest.raises(PrecdxError, match="closed"):
        m.run(fs)


def test_bad_fact_values_are_precdx_errors():
    pack = make_pack({"all": [{"fact": "tdx_alpha", "where": {"x": {"gt": 0.0}, "n": {"ge": 0}}}]})
    m = DurableMatcher(pack)
    try:
        forged = facts({"type": "tdx_alpha"})[0].model_copy(update={"x": "0.5"})  # bypasses validation
        with pytest.raises(PrecdxError, match=r"fact #0 \(tdx_alpha\.x\): a number field holds '0\.5'"):
            m.run([forged])
        with pytest.raises(PrecdxError, match=r"fact #1 \(tdx_alpha\.n\).*too large"):
            m.run(facts({"type": "tdx_alpha", "n": 1}, {"type": "tdx_alpha", "n": 2 ** 60}))
        assert m.run(facts({"type": "tdx_alpha", "x": 1.0, "n": 0}))
        assert m.live_sessions() == 0
    finally:
        m.close()


class TdxWide(Fact):
    """Test-only fact type with more fields than the engine's 255 properties allow once
    the non-finite flags are counted."""

    __annotations__ = {f"f{i}": Num | None for i in range(130)}
    locals().update({f"f{i}": F("a number") for i in range(130)})


def test_too_many_properties_per_fact_names_the_rule():
    added = register_types({"tdx_wide": TdxWide})
    try:
        where = {f"f{i}": {"gt": 0.0} for i in range(130)}
        pack = make_pack({"all": [{"fact": "tdx_wide", "where": where}]})
        with pytest.raises(PrecdxError, match=r"rule TDX-001: facts of type 'tdx_wide' would carry 263 properties"):
            DurableMatcher(pack)
    finally:
        unregister_types(added)


# When the last join of a pattern is false the engine reads past the end of the pattern's
# expression list (reduceExpressionSequence); whether that segfaults depends on heap layout, so
# a crash test cannot be relied on: the invariant that prevents it is checked instead.
def test_every_join_list_ends_with_a_join_that_always_holds():
    pack = make_pack({"all": [{"fact": "tdx_alpha", "as": "a", "where": {"x": {"gt": {"ref": "a.y"}}}},
                              {"fact": "tdx_beta", "as": "b", "where": {"n": {"ge": {"ref": "a.n"}}, "k": {"in": ["p", "q"]}}}],
                      "none": [{"fact": "tdx_alpha", "where": {"s": {"eq": {"ref": "a.s"}}}}]})
    m = DurableMatcher(pack)
    try:
        patterns = [cond for rule in m.program.shards[0] for entry in rule.definition["all"] for cond in entry.values()]
        assert len(patterns) == 3 + 2  # two case splits (a.s usable or not); the second drops the none
        for cond in patterns:
            steps = cond["$and"]
            joins = [i for i, s in enumerate(steps) if _is_join(s)]
            if joins:
                assert steps[joins[-1]] in ({"$gte": {"sid": {"p0": "sid"}}}, {"$gte": {"sid": {"$m": "sid"}}})
                assert all(not _is_join(s) and "$or" in s for s in steps[joins[-1] + 1:])
                assert not any("$or" in s for s in steps[:joins[-1]])
    finally:
        m.close()


def _is_join(step: dict) -> bool:
    (key, value), = step.items()
    inner = value if key.startswith("$") and key not in ("$ex", "$nex", "$or") else {key: value}
    return any(isinstance(v, dict) for v in inner.values()) if isinstance(inner, dict) else False
