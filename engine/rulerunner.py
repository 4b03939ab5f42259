"""Run the rule test cases of the rule pack (loaded by precdx.rulepack.ruletest): each case's
facts go through the matcher, and through the whole diagnosis when the case names the failure
mode that must rank first. The runner sits above the diagnosis in the package layering; the
case files themselves are part of the rule pack.

A case that cannot be run (malformed, duplicate id, unknown rule) is never skipped: it becomes
a failed result naming file:line, and a run that executes zero cases is a failure for the
caller (the CLI and tests/test_rule_cases.py both check it).
"""
from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from precdx.errors import PrecdxError
from precdx.facts import FactSet
from precdx.rulepack.ruletest import RuleCase, load_cases
from precdx.vocabulary import ENGINES


@dataclass(frozen=True)
class Result:
    case_id: str
    passed: bool
    message: str
    rule: str = ""
    kind: str = ""
    engine: str = ""
    path: str = ""
    line: int | None = None
    fired: tuple[str, ...] = field(default_factory=tuple)


def available_engines() -> list[str]:
    """The matcher back ends present in this installation (python always; durable when its
    module exists -- a durable module that exists but breaks is an error, not a skip)."""
    engines = ["python"]
    if importlib.util.find_spec("precdx.matching.durable_engine") is not None:
        engines.append("durable")
    return engines


def _matcher(engine: str, rules_path: str | Path | None):
    from precdx.diagnosis import get_matcher

    try:
        return get_matcher(engine, str(rules_path) if rules_path else None)
    except ImportError as exc:
        raise PrecdxError(f"the {engine} matcher is not available: {exc}",
                          hint="use --engine python") from None


def _fail(case: RuleCase, engine: str, message: str, fired: Iterable[str] = ()) -> Result:
    return Result(case.case_id, False, f"{case.where}: {message}", case.rule, case.kind, engine, case.path,
                  case.line, tuple(sorted(set(fired))))


def run_case(case: RuleCase, *, engine: str = "python", rules_path: str | Path | None = None) -> Result:
    """Run one case against the rule pack at `rules_path` (the packaged pack when None)."""
    if case.error is not None:
        return _fail(case, engine, case.error)
    try:
        pack, matcher = _matcher(engine, rules_path)
    except PrecdxError as exc:
        return _fail(case, engine, f"the rule pack does not load: {exc.render()}")
    by_id = pack.by_id()
    target = by_id.get(case.rule)
    if target is None:
        return _fail(case, engine, f"unknown rule {case.rule!r}: no rule (or alias) with this id in the pack")
    facts = list(case.facts)
    firings = matcher.run(facts)
    fired = {f.rule_id for f in firings}
    did_fire = target.id in fired
    if case.kind == "positive" and not did_fire:
        from precdx.matching.python_engine import near_misses

        hint = [nm.missing for nm in near_misses(pack, facts, fired) if nm.rule_id == target.id]
        why = f"; one condition short: {hint[0]}" if hint else "; no single condition explains it"
        return _fail(case, engine, f"{target.id} did not fire on a positive case{why}", fired)
    if case.kind != "positive" and did_fire:
        bound = next(f for f in firings if f.rule_id == target.id)
        what = ", ".join(f"{alias}={facts[i].type}" for alias, i in bound.bindings)
        return _fail(case, engine, f"{target.id} fired on a {case.kind} case (bound {what})", fired)
    if case.top is not None:
        from precdx.diagnosis import diagnose

        diag = diagnose(FactSet(facts), engine=engine, rules_path=str(rules_path) if rules_path else None,
                        with_near_misses=False)
        ranked = [(h.failure_mode, h.score) for h in diag.hypotheses]
        if not ranked or ranked[0][0] != case.top:
            shown = ", ".join(f"{m} ({s:.2f})" for m, s in ranked[:3]) or "no hypothesis above the report threshold"
            return _fail(case, engine, f"expected {case.top} to rank first; got {shown}", fired)
    verb = "fired" if case.kind == "positive" else "stayed silent"
    return Result(case.case_id, True, f"{target.id} {verb}" + (f"; {case.top} ranked first" if case.top else ""),
                  case.rule, case.kind, engine, case.path, case.line, tuple(sorted(fired)))


def run_rule_tests(rules_path: str | Path | None = None, *, engine: str = "python",
                   select: str | None = None) -> list[Result]:
    """Run every case (or those whose case id contains `select`). An empty list means zero
    cases ran, which callers must treat as a failure."""
    cases = load_cases(rules_path)
    if select:
        cases = [c for c in cases if select in c.case_id]
    if engine not in ENGINES:
        raise PrecdxError(f"unknown engine {engine!r} (choose python or durable)")
    if engine not in available_engines():  # one clear error, not N failed cases
        raise PrecdxError(f"the {engine} matcher is not available in this installation", hint="use --engine python")
    return [run_case(c, engine=engine, rules_path=rules_path) for c in cases]
