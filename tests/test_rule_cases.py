"""The rule pack's own test cases (`rules/**/*.test.yaml`), one pytest test per case and engine:
`pytest -k OPD-001` runs one rule's cases. A case that cannot run fails (never skips), and a
pack with zero cases fails too (promtool's lesson)."""
from __future__ import annotations

from pathlib import Path

from precdx.paths import rules_dir
from precdx.rulepack.ruletest import load_cases
from precdx.rulerunner import available_engines, run_case


def _case_id(case) -> str:
    """`<failure mode file>-<RULE>-<case>`, so `pytest -k data.input_mismatch` runs one mode's
    cases and `pytest -k DAT-001` one rule's."""
    stem = Path(case.path).name.removesuffix(".test.yaml") if case.path else "rules"
    return f"{stem}-{case.case_id}"


def pytest_generate_tests(metafunc):
    if "rule_case" in metafunc.fixturenames:
        cases = load_cases(rules_dir())
        metafunc.parametrize("rule_case", cases, ids=[_case_id(c) for c in cases])
    if "matcher_engine" in metafunc.fixturenames:
        metafunc.parametrize("matcher_engine", available_engines())


def test_rule_case(rule_case, matcher_engine):
    result = run_case(rule_case, engine=matcher_engine)
    assert result.passed, result.message


def test_rule_cases_exist():
    cases = load_cases(rules_dir())
    assert cases, f"no rule test cases (*.test.yaml) under {rules_dir()}: zero cases is a failure"
    runnable = [c for c in cases if c.error is None]
    assert runnable, "every rule test case is malformed"
