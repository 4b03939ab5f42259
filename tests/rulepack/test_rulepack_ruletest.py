"""The rule test runner (`precdx rules test`, tests/test_rule_cases.py): cases pass and fail for
the right reasons, anything that cannot run fails with file:line, zero cases is a failure."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

from precdx.errors import PrecdxError
from precdx.rulepack.ruletest import case_counts, load_cases
from precdx.rulerunner import available_engines, run_case, run_rule_tests
from tests.rulepack.builders import diff_fact, good_cases, good_pack, rule_doc, write_cases, write_rule

ENGINES = available_engines()


def _pack(tmp_path, cases, rules=None):
    root = tmp_path / "rules"
    for doc in rules or [rule_doc()]:
        write_rule(root, doc)
    write_cases(root, cases)
    return root


def _one(tmp_path, case, engine="python", rules=None):
    root = _pack(tmp_path, [case], rules)
    results = run_rule_tests(root, engine=engine)
    assert len(results) == 1
    return results[0]


def test_both_engines_available_and_runnable(tmp_path, tiny_kb):
    # durable-rules is a hard dependency: both matchers must be present, and each must run a case
    assert set(ENGINES) == {"python", "durable"}
    root = good_pack(tmp_path / "rules")
    for engine in ENGINES:
        assert all(r.passed for r in run_rule_tests(root, engine=engine))


@pytest.mark.parametrize("engine", ENGINES)
def test_good_cases_pass(tmp_path, tiny_kb, engine):
    root = good_pack(tmp_path / "rules")
    results = run_rule_tests(root, engine=engine)
    assert [r.case_id for r in results] == ["TST-001-positive-lr-doubled", "TST-001-negative-lr-within-tolerance",
                                            "TST-001-insufficient-no-config"]
    assert all(r.passed for r in results), [r.message for r in results]
    assert results[0].fired == ("TST-001",) and "ranked first" in results[0].message


@pytest.mark.parametrize("engine", ENGINES)
def test_positive_that_does_not_fire_fails_with_near_miss(tmp_path, tiny_kb, engine):
    r = _one(tmp_path, {"id": "p", "rule": "TST-001", "kind": "positive", "facts": [diff_fact(rel_change=0.05)]},
             engine)
    assert not r.passed
    assert "did not fire" in r.message and "rel_change > 0.1" in r.message
    assert r.message.startswith(f"{r.path}:{r.line}:")


@pytest.mark.parametrize("kind", ["negative", "insufficient"])
def test_silent_kinds_fail_when_the_rule_fires(tmp_path, tiny_kb, kind):
    r = _one(tmp_path, {"id": "n", "rule": "TST-001", "kind": kind, "facts": [diff_fact()]})
    assert not r.passed and f"fired on a {kind} case" in r.message and "d=config_diff" in r.message


def test_unknown_rule_fails(tmp_path, tiny_kb):
    r = _one(tmp_path, {"id": "n", "rule": "TST-404", "kind": "negative", "facts": []})
    assert not r.passed and "unknown rule 'TST-404'" in r.message


def test_old_id_runs_the_renamed_rule(tmp_path, tiny_kb):
    r = _one(tmp_path, {"id": "p", "rule": "OLD-001", "kind": "positive", "facts": [diff_fact()]},
             rules=[rule_doc(aliases=["OLD-001"])])
    assert r.passed, r.message
    r = _one(tmp_path / "x", {"id": "n", "rule": "OLD-001", "kind": "negative", "facts": [diff_fact()]},
             rules=[rule_doc(aliases=["OLD-001"])])
    assert not r.passed and "TST-001 fired" in r.message


def test_top_must_rank_first(tmp_path, tiny_kb):
    case = {"id": "p", "rule": "TST-001", "kind": "positive", "facts": [diff_fact()],
            "top": "config.precision_mismatch"}
    r = _one(tmp_path, case)
    assert not r.passed
    assert "expected config.precision_mismatch to rank first; got config.hyperparameter_mismatch (0." in r.message


def test_top_on_a_silent_case_with_no_hypothesis(tmp_path, tiny_kb):
    r = _one(tmp_path, {"id": "n", "rule": "TST-001", "kind": "negative", "facts": [],
                        "top": "config.hyperparameter_mismatch"})
    assert not r.passed and "no hypothesis above the report threshold" in r.message


MALFORMED = [
    ({"id": "a", "rule": "TST-001", "kind": "positive"}, "missing 'facts'"),
    ({"id": "a", "rule": "TST-001", "kind": "maybe", "facts": []}, "kind 'maybe' is not one of"),
    ({"id": "a b", "rule": "TST-001", "kind": "positive", "facts": []}, "case id 'a b' must be"),
    ({"id": "a", "rule": "TST-001", "kind": "positive", "facts": [], "colour": 1}, "unknown key 'colour'"),
    ({"id": "a", "rule": "TST-001", "kind": "positive", "facts": {"type": "config_diff"}}, "'facts' must be a list"),
    ({"id": "a", "rule": "TST-001", "kind": "positive", "facts": [{"type": "config_dif"}]},
     "unknown fact type 'config_dif'"),
    ({"id": "a", "rule": "TST-001", "kind": "positive", "facts": [{**diff_fact(), "rel_change": "big"}]},
     "not a number"),
    ({"id": "a", "rule": "TST-001", "kind": "positive", "facts": [diff_fact(), diff_fact(rel_change=2.0)]},
     "contradictory facts"),
    ({"id": "a", "rule": "TST-001", "kind": "positive", "facts": [], "top": 3}, "'top' must be"),
    ({"id": "a", "rule": "", "kind": "positive", "facts": []}, "'rule' must name a rule id"),
]


@pytest.mark.parametrize("case, expected", MALFORMED, ids=[m for _, m in MALFORMED])
def test_malformed_case_fails_with_file_and_line(tmp_path, tiny_kb, case, expected):
    root = _pack(tmp_path, good_cases() + [case])
    cases = load_cases(root)
    bad = cases[-1]
    assert bad.error and expected in bad.error, bad.error
    results = run_rule_tests(root)
    assert [r.passed for r in results] == [True, True, True, False]
    text = (root / "tst-001.test.yaml").read_text().splitlines()
    assert results[-1].line and results[-1].line > 1 and text[results[-1].line - 1].strip()
    assert f"tst-001.test.yaml:{results[-1].line}:" in results[-1].message


def test_duplicate_case_id_in_a_file_fails(tmp_path, tiny_kb):
    cases = good_cases()
    root = _pack(tmp_path, cases + [dict(cases[1])])
    results = run_rule_tests(root)
    assert [r.passed for r in results] == [True, True, True, False]
    assert "duplicate case id 'negative-lr-within-tolerance'" in results[-1].message
    assert "first at line" in results[-1].message


def test_same_full_case_id_in_two_files_fails(tmp_path, tiny_kb):
    root = good_pack(tmp_path / "rules")
    write_cases(root, [good_cases()[1]], name="more")
    failed = [r for r in run_rule_tests(root) if not r.passed]
    assert len(failed) == 1 and "also used at" in failed[0].message


BROKEN_FILES = [
    ("cases: [\n", "invalid YAML"),
    ("- id: a\n", "a mapping with a 'cases' list"),
    ("cases: []\n", "'cases' is empty"),
    ("cases: {id: a}\n", "'cases' must be a list"),
    ("cases: [{id: a, rule: TST-001, kind: negative, facts: []}]\nrule: TST-001\n", "unknown top-level key"),
    ("cases:\n  - id: a\n    id: b\n", "duplicate key 'id'"),
]


@pytest.mark.parametrize("text, expected", BROKEN_FILES, ids=[e for _, e in BROKEN_FILES])
def test_broken_test_file_fails(tmp_path, tiny_kb, text, expected):
    root = tmp_path / "rules"
    write_rule(root, rule_doc())
    (root / "tst-001.test.yaml").write_text(text)
    results = run_rule_tests(root)
    assert len(results) == 1 and not results[0].passed and expected in results[0].message


def test_zero_cases_is_an_empty_result_and_a_cli_failure(tmp_path, tiny_kb):
    from cli import main

    root = tmp_path / "rules"
    write_rule(root, rule_doc())
    assert run_rule_tests(root) == []
    res = CliRunner().invoke(main, ["rules", "test", "--rules", str(root)])
    assert res.exit_code == 1 and "0 passed, 0 failed" in res.output


def test_select_filters_by_case_id(tmp_path, tiny_kb):
    root = good_pack(tmp_path / "rules")
    assert [r.case_id for r in run_rule_tests(root, select="negative")] == ["TST-001-negative-lr-within-tolerance"]
    assert run_rule_tests(root, select="TST-999") == []


def test_broken_rule_pack_fails_every_case(tmp_path, tiny_kb):
    root = good_pack(tmp_path / "rules")
    write_rule(root, rule_doc(id="TST-002", name="x", failure_modes=["no.such_mode"]), name="broken")
    results = run_rule_tests(root)
    assert results and all(not r.passed and "rule pack does not load" in r.message for r in results)


def test_single_rule_file_finds_its_test_file(tmp_path, tiny_kb):
    root = good_pack(tmp_path / "rules")
    results = run_rule_tests(root / "tst-001.yaml")
    assert len(results) == 3 and all(r.passed for r in results)


def test_unknown_engine_is_an_error(tmp_path, tiny_kb):
    with pytest.raises(PrecdxError):
        run_rule_tests(good_pack(tmp_path / "rules"), engine="prolog")


def test_cli_reports_failures(tmp_path, tiny_kb):
    from cli import main

    root = _pack(tmp_path, good_cases() + [{"id": "x", "rule": "TST-404", "kind": "negative", "facts": []}])
    res = CliRunner().invoke(main, ["rules", "test", "--rules", str(root)])
    assert res.exit_code == 1
    assert "FAIL TST-404-x:" in res.output and "3 passed, 1 failed" in res.output
    res = CliRunner().invoke(main, ["rules", "test", "--rules", str(root), "-k", "TST-001"])
    assert res.exit_code == 0 and "3 passed, 0 failed" in res.output


def test_case_counts_follow_aliases_and_skip_broken(tmp_path, tiny_kb):
    root = _pack(tmp_path, good_cases() + [
        {"id": "old", "rule": "OLD-001", "kind": "positive", "facts": [diff_fact()]},
        {"id": "bad", "rule": "TST-001", "kind": "negative"},
    ], rules=[rule_doc(aliases=["OLD-001"])])
    rule = rule_doc(aliases=["OLD-001"])
    from precdx.rulepack.schema import Rule

    counts = case_counts(load_cases(root), [Rule.model_validate(rule)])
    assert dict(counts["TST-001"]) == {"positive": 2, "negative": 1, "insufficient": 1}


def test_run_case_reports_the_engine(tmp_path, tiny_kb):
    root = good_pack(tmp_path / "rules")
    case = load_cases(root)[0]
    for engine in ENGINES:
        r = run_case(case, engine=engine, rules_path=root)
        assert r.passed and r.engine == engine
