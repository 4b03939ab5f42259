"""`precdx rules lint`: every issue type fires on a bad example and stays silent on the good pack
(and on near-miss good variants); issues carry file:line; the CLI exits 1 on errors."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import pytest
from click.testing import CliRunner

from tests.rulepack.builders import good_cases, good_pack, rule_doc, write_cases, write_rule
from precdx.rulepack.lint import ISSUE_TYPES, VALIDATORS, LintIssue, lint, render_lint


def _step(command: str | None, action: str = "Run it") -> dict:
    step = {"action": {"en": action, "zh": action + "（中文）"}, "cost": "read"}
    if command is not None:
        step["command"] = command
    return step


def _with_when(**when) -> Callable[[Path], None]:
    """The base rule with other conditions; its explanation prints only `d.name`, which every
    config_diff carries (the base text also prints d.rel_change, which these conditions may not test)."""
    def make(root: Path) -> None:
        write_rule(root, rule_doc(when=when, explanation={"en": "{d.name} differs", "zh": "{d.name} 不一致"}))
        write_cases(root, good_cases(top=None))
    return make


def _with(**overrides) -> Callable[[Path], None]:
    def make(root: Path) -> None:
        write_rule(root, rule_doc(**overrides))
        write_cases(root, good_cases(top=None))
    return make


def _d(**where) -> dict:
    return {"fact": "config_diff", "as": "d", "where": where}


HYPER = {"category": "hyperparameter", "relevant": True, "rel_change": {"gt": 0.1}}


# --------------------------------------------------------------- bad examples, one or more per issue type
def _yaml_invalid(root):
    (root / "bad.yaml").write_text("schema_version: 1\nid: TST-009\nid: TST-010\n")


def _duplicate_id(root):
    good_pack(root)
    write_rule(root, rule_doc(name="again"), name="again")


def _duplicate_alias(root):
    good_pack(root)
    write_rule(root, rule_doc(id="TST-002", name="second", aliases=["TST-001"],
                              when={"all": [_d(category="precision")]}), name="second")
    write_cases(root, good_cases("TST-002", top=None), name="second")


def _empty_file(root):
    good_pack(root)
    (root / "empty.yaml").write_text("# nothing yet\n")


def _case_invalid(root):
    write_rule(root, rule_doc())
    write_cases(root, good_cases(top=None) + [{"id": "x", "rule": "TST-001", "kind": "maybe", "facts": []}])


def _case_unknown_rule(root):
    good_pack(root)
    write_cases(root, [{"id": "x", "rule": "TST-404", "kind": "negative", "facts": []}], name="other")


def _case_unknown_top(root):
    write_rule(root, rule_doc())
    write_cases(root, good_cases(top="nope.not_a_mode"))


def _kb_unavailable(root):
    good_pack(root)


def _placeholder_title(root):
    write_rule(root, rule_doc(title={"en": "{d.name} differs", "zh": "{d.name} 不一致"}))
    write_cases(root, good_cases(top=None))


def _empty_action(root):
    doc = rule_doc()
    doc["next_steps"][0]["action"] = {"en": " ", "zh": "对齐"}
    write_rule(root, doc)
    write_cases(root, good_cases(top=None))


def _empty_command(root):
    doc = rule_doc()
    doc["next_steps"][0]["command"] = "  "
    write_rule(root, doc)
    write_cases(root, good_cases(top=None))


def _no_zh_action(root):
    doc = rule_doc()
    doc["next_steps"][0]["action"] = {"en": "Align the setting"}
    write_rule(root, doc)
    write_cases(root, good_cases(top=None))


def _cases_without(kind):
    def make(root):
        write_rule(root, rule_doc())
        write_cases(root, [c for c in good_cases(top=None) if c["kind"] != kind])
    return make


def _two_rules(second: dict, same_cases=True):
    def make(root):
        good_pack(root)
        write_rule(root, second, name="second")
        if same_cases:
            write_cases(root, good_cases(second["id"], top=None), name="second")
    return make


def _deprecated_mentioned(root):
    good_pack(root)
    write_rule(root, rule_doc(id="TST-002", name="old", status="deprecated",
                              when={"all": [_d(category="precision")]}), name="old")
    doc = rule_doc(id="TST-003", name="new", when={"all": [_d(category="data")]},
                   explanation={"en": "replaces TST-002 for {d.name}", "zh": "取代 TST-002：{d.name}"})
    write_rule(root, doc, name="new")
    write_cases(root, good_cases("TST-003", top=None), name="new")


def _old_id_case(root):
    write_rule(root, rule_doc(aliases=["OLD-001"]))
    write_cases(root, good_cases(top=None) + [{"id": "by-old-id", "rule": "OLD-001", "kind": "negative",
                                                "facts": []}])


def _deprecated_only(root):
    write_rule(root, rule_doc(status="deprecated"))
    write_cases(root, good_cases(top=None))


def _former_field_name(root):
    write_rule(root, rule_doc(when={"all": [_d(ref_role="baseline", **HYPER)]}))
    write_cases(root, good_cases(top=None))


BAD: list[tuple[str, str, Callable[[Path], None]]] = [
    ("S001", "duplicate-key", _yaml_invalid),
    ("S002", "unknown-key", _with(colour="red")),
    ("S002", "bad-id", _with(id="tst-1")),
    ("S003", "schema-version", _with(schema_version=2)),
    ("S004", "duplicate-id", _duplicate_id),
    ("S004", "alias-collides", _duplicate_alias),
    ("S005", "empty-file", _empty_file),
    ("S006", "case-bad-kind", _case_invalid),
    ("S007", "former-field-name", _former_field_name),
    ("R001", "unknown-mode", _with(failure_modes=["config.no_such_mode"])),
    ("R001", "unknown-against", _with(against=["nope.nope"])),
    ("R002", "kb-missing", _kb_unavailable),
    ("R003", "unknown-fact", _with_when(all=[{"fact": "config_dif", "as": "d", "where": {}}])),
    ("R004", "unknown-field", _with_when(all=[_d(categroy="hyperparameter")])),
    ("R005", "descriptive-field", _with_when(all=[_d(baseline_name="lr")])),
    ("R006", "unbound-alias", _with(explanation={"en": "{x.name}", "zh": "{x.name}"})),
    ("R006", "missing-field", _with(explanation={"en": "{d.colour}", "zh": "{d.colour}"})),
    ("R006", "any-alias-not-common", lambda root: _with(
        when={"all": [_d(**HYPER)], "any": [{"fact": "config_value", "as": "v", "where": {}},
                                            {"fact": "env_diff", "as": "e", "where": {}}]},
        explanation={"en": "{v.name}", "zh": "{v.name}"})(root)),
    ("R006", "placeholder-in-title", _placeholder_title),
    ("R006", "placeholder-in-why", lambda root: _with(next_steps=[{
        "action": {"en": "Align", "zh": "对齐"}, "why": {"en": "{q.name}", "zh": "{q.name}"}, "cost": "read"}])(root)),
    ("R007", "format-on-string", _with(explanation={"en": "{d.name:.2f}", "zh": "{d.name:.2f}"})),
    ("R008", "empty-command", _empty_command),
    ("R009", "empty-action", _empty_action),
    ("R010", "empty-reference", _with(references=["G2.2", " "])),
    ("R011", "case-unknown-rule", _case_unknown_rule),
    ("R012", "case-unknown-top", _case_unknown_top),
    ("C001", "dmi-combined-items", _with(next_steps=[_step("ascend-dmi -dg -i aicore,hbm,hccs -q")])),
    ("C001", "msprobe-unknown-option", _with(next_steps=[_step("msprobe compare -tp a -gp b --frobnicate")])),
    ("C002", "unknown-framework-flag", _with(next_steps=[_step(None, "Drop --use-fused-adam on the target")])),
    ("C003", "deprecated-flag", _with(next_steps=[_step(None, "Add --use-deter-comp on the target")])),
    ("C004", "unknown-env", _with(next_steps=[_step("export HCCL_MAKE_IT_WORK=1")])),
    ("C004", "undocumented-env-set", _with(next_steps=[_step("export NCCL_DETERMINISTIC=1")])),
    ("C005", "bad-env-value", _with(next_steps=[_step("export HCCL_DETERMINISTIC=maybe")])),
    ("C006", "sed-in-place", _with(next_steps=[_step("sed -i 's/ --overlap-param-gather//' train.sh")])),
    ("C007", "removed-task", _with(next_steps=[_step(
        "echo '{\"task\": \"overflow_check\", \"level\": \"L1\"}' > msprobe_config.json")])),
    ("R014", "placeholder-field-untested", _with(when={"all": [_d(category="hyperparameter", relevant=True)]})),
    ("R015", "descriptive-placeholder", _with(explanation={"en": "{d.baseline_name} differs",
                                                           "zh": "{d.baseline_name} 不一致"})),
    ("R013", "unknown-operator", _with_when(all=[_d(rel_change={"gtt": 1})])),
    ("R013", "bad-regex", _with_when(all=[_d(name={"matches": "lr("})])),
    ("Q001", "no-next-steps", _with(next_steps=None)),
    ("Q002", "no-references", _with(references=None)),
    ("Q003", "no-zh-title", _with(title={"en": "A hyperparameter differs"})),
    ("Q003", "no-zh-action", _no_zh_action),
    ("Q004", "zh-copies-en", _with(explanation={"en": "{d.name} differs", "zh": "{d.name} differs"})),
    ("Q005", "no-positive", _cases_without("positive")),
    ("Q006", "no-negative", _cases_without("negative")),
    ("Q007", "no-insufficient", _cases_without("insufficient")),
    ("Q008", "no-false-positives", _with(false_positives=None)),
    ("L001", "gt5-lt3", _with_when(all=[_d(rel_change={"gt": 5, "lt": 3})])),
    ("L001", "ge-lt-equal", _with_when(all=[_d(rel_change={"ge": 2, "lt": 2})])),
    ("L001", "eq-and-in", _with_when(all=[_d(name={"eq": "lr", "in": ["seed", "clip_grad"]})])),
    ("L001", "eq-and-ne", _with_when(all=[_d(name={"eq": "lr", "ne": "lr"})])),
    ("L001", "eq-outside-bounds", _with_when(all=[_d(rel_change={"eq": 0.5, "gt": 1})])),
    ("L001", "eq-fails-regex", _with_when(all=[_d(name={"eq": "lr", "matches": "seed.*"})])),
    ("L001", "bool-ne-both", _with_when(all=[_d(relevant={"not_in": [True, False]})])),
    ("L001", "choices-all-excluded", _with_when(all=[_d(presence={
        "not_in": ["both", "baseline_only", "target_only"]})])),
    ("L001", "absent-and-compared", _with_when(all=[_d(rel_change={"exists": False, "gt": 1})])),
    ("L001", "nonfinite-and-compared", _with_when(all=[_d(rel_change={"nonfinite": True, "lt": 1})])),
    ("L001", "join-pins-two-values", _with_when(all=[
        _d(name="lr", **HYPER),
        {"fact": "config_value", "as": "v", "where": {"name": {"eq": {"ref": "d.name"}, "in": ["seed"]}}}])),
    ("L001", "every-any-dead", _with_when(all=[_d(**HYPER)], any=[
        {"fact": "config_value", "where": {"number": {"gt": 2, "lt": 1}}},
        {"fact": "env_diff", "where": {"name": {"eq": "A", "ne": "A"}}}])),
    ("L002", "one-any-dead", _with_when(all=[_d(**HYPER)], any=[
        {"fact": "config_value", "where": {"number": {"gt": 2, "lt": 1}}},
        {"fact": "config_value", "where": {"number": {"gt": 2}}}])),
    ("L003", "eq-outside-choices", _with_when(all=[_d(category="hyperparam", relevant=True)])),
    ("L003", "in-outside-choices", _with_when(all=[_d(category={"in": ["hyperparameter", "optimiser"]})])),
    ("L004", "none-never-matches", _with_when(all=[_d(**HYPER)], none=[
        {"fact": "config_value", "where": {"number": {"gt": 2, "lt": 1}}}])),
    ("L005", "none-same-as-bound", _with_when(all=[_d(**HYPER)], none=[
        {"fact": "config_diff", "where": {"category": "hyperparameter"}}])),
    ("L005", "none-without-conditions", _with_when(all=[_d(**HYPER)], none=[{"fact": "config_diff"}])),
    ("L005", "none-joins-itself", _with_when(all=[_d(**HYPER)], none=[
        {"fact": "config_diff", "where": {"name": {"eq": {"ref": "d.name"}}, "rel_change": {"gt": 0.05}}}])),
    ("L006", "shadowed", _two_rules(rule_doc(
        id="TST-002", name="other-mode", failure_modes=["config.precision_mismatch"],
        when={"all": [{"fact": "config_diff", "as": "z", "where": dict(HYPER)}]},
        explanation={"en": "{z.name}", "zh": "{z.name} 不同"}))),
    ("L007", "duplicate-rule", _two_rules(rule_doc(id="TST-002", name="same-again"))),
    ("L008", "user-only-fact", _with_when(all=[
        {"fact": "observation", "where": {"name": "sgd_aligns", "value": True}}, _d(**HYPER)])),
    ("L009", "deprecated-mentioned", _deprecated_mentioned),
    ("L010", "supports-and-against", _with(against=["config.hyperparameter_mismatch"])),
    ("L011", "case-uses-old-id", _old_id_case),
    ("L012", "deprecated-only-support", _deprecated_only),
]

GOOD_VARIANTS: list[tuple[str, str, Callable[[Path], None]]] = [
    ("L001", "open-interval", _with_when(all=[_d(category="hyperparameter", relevant=True,
                                                 rel_change={"gt": 3, "lt": 5})])),
    ("L001", "eq-in-regex", _with_when(all=[_d(category="hyperparameter", relevant=True,
                                               name={"eq": "lr", "in": ["lr", "seed"], "matches": "l.*"})])),
    ("L001", "nonfinite-false-and-compared", _with_when(all=[_d(category="hyperparameter", relevant=True,
                                                                rel_change={"nonfinite": False, "gt": 0.1})])),
    ("L001", "join-to-unpinned", _with_when(all=[
        _d(**HYPER), {"fact": "config_value", "as": "v", "where": {"name": {"eq": {"ref": "d.name"}}}}])),
    ("L005", "none-distinct-by-ne-join", _with_when(all=[_d(**HYPER)], none=[
        {"fact": "config_diff", "where": {"name": {"ne": {"ref": "d.name"}}, "category": "hyperparameter"}}])),
    ("L005", "none-other-category", _with_when(all=[_d(**HYPER)], none=[
        {"fact": "config_diff", "where": {"category": "precision"}}])),
    ("L005", "none-stricter-threshold", _with_when(all=[_d(**HYPER)], none=[
        {"fact": "config_diff", "where": {"rel_change": {"gt": 0.5}}}])),
    ("L006", "different-threshold", _two_rules(rule_doc(
        id="TST-002", name="big-change",
        when={"all": [_d(category="hyperparameter", relevant=True, rel_change={"gt": 0.5})]}))),
    ("L008", "any-has-collected-alternative", _with_when(all=[_d(**HYPER)], any=[
        {"fact": "observation", "where": {"name": "sgd_aligns"}}, {"fact": "config_value", "where": {}}])),
    ("R006", "any-alias-common", _with(
        when={"all": [_d(**HYPER)], "any": [{"fact": "config_value", "as": "v", "where": {"number": {"gt": 1}}},
                                            {"fact": "config_value", "as": "v", "where": {"flag": True}}]},
        explanation={"en": "{v.name} {d.name}", "zh": "{v.name} {d.name} 不同"})),
    ("R007", "format-on-number", _with(explanation={"en": "{d.rel_change:.2e}", "zh": "{d.rel_change:.2e} 不同"})),
    ("R014", "tested-field", _with(explanation={"en": "{d.name} moved {d.rel_change:.1%}", "zh": "{d.name} 变化 {d.rel_change:.1%}"})),
    ("R014", "joined-field", _with(when={"all": [_d(category="hyperparameter", relevant=True),
                                                 {"fact": "config_value", "as": "v",
                                                  "where": {"number": {"gt": {"ref": "d.rel_change"}}}}]})),
    ("Q004", "command-only-zh-equal", _with(explanation={"en": "TP=2", "zh": "TP=2"})),
    ("C001", "dmi-stress-valid", _with(next_steps=[_step("ascend-dmi -dg -i aicore -s -sc 60 -q")])),
    ("C003", "deprecated-flag-said-so", _with(next_steps=[_step(None, "Use --npu-deterministic (older releases "
                                                                      "called it --use-deter-comp, now deprecated)")])),
    ("C005", "valid-env-values", _with(next_steps=[_step("export HCCL_DETERMINISTIC=true CUBLAS_WORKSPACE_CONFIG=:4096:8")])),
    ("C006", "sed-into-copy", _with(next_steps=[_step("sed 's/--lr 1e-4/--lr 0/' target/train.sh > target_rerun/train.sh")])),
    ("C007", "valid-config", _with(next_steps=[_step(
        "echo '{\"task\": \"statistics\", \"level\": \"mix\", \"risk_level\": \"ALL\", "
        "\"statistics\": {\"summary_mode\": \"md5\"}}' > msprobe_config.json")])),
]


def _run(tmp_path, tiny_kb, make, kb_path=None) -> list[LintIssue]:
    root = tmp_path / "rules"
    root.mkdir()
    make(root)
    return lint(root, kb_path=kb_path or tiny_kb)


def test_good_pack_is_clean(tmp_path, tiny_kb):
    issues = _run(tmp_path, tiny_kb, good_pack)
    assert issues == [], render_lint(issues)
    assert render_lint(issues).startswith("rule pack is clean")


@pytest.mark.parametrize("code, label, make", BAD, ids=[f"{c}-{label}" for c, label, _ in BAD])
def test_bad_example_is_reported(tmp_path, tiny_kb, code, label, make):
    kb_path = tmp_path / "no-kb" if code == "R002" else None
    if kb_path:
        kb_path.mkdir()
    issues = _run(tmp_path, tiny_kb, make, kb_path)
    hits = [i for i in issues if i.code == code]
    assert hits, f"{code} not reported; got:\n{render_lint(issues)}"
    hit = hits[0]
    assert hit.severity == ISSUE_TYPES[code].severity
    assert hit.path and Path(hit.path).exists()
    if code != "R002":
        assert hit.line, f"{code} without a line: {hit.render()}"


@pytest.mark.parametrize("code, label, make", GOOD_VARIANTS, ids=[f"{c}-{label}" for c, label, _ in GOOD_VARIANTS])
def test_good_variant_is_silent(tmp_path, tiny_kb, code, label, make):
    issues = _run(tmp_path, tiny_kb, make)
    assert not [i for i in issues if i.code == code], render_lint(issues)
    assert not [i for i in issues if i.severity == "error"], render_lint(issues)


def test_every_issue_type_has_a_bad_example():
    """sqlfluff's lesson: a check without an example that triggers it is untested."""
    assert {code for code, _, _ in BAD} == set(ISSUE_TYPES)


def test_issue_types_are_declared_once_with_description():
    names = [t.name for t in ISSUE_TYPES.values()]
    assert len(names) == len(set(names))
    owners = [t.code for v in VALIDATORS.values() for t in v.issue_types]
    assert sorted(owners) == sorted(ISSUE_TYPES)
    for t in ISSUE_TYPES.values():
        assert t.description.endswith(".") and t.severity in ("error", "warning", "info")
    assert {"SchemaValidator", "ReferenceValidator", "QualityValidator", "LogicValidator"} <= set(VALIDATORS)


def test_lines_point_at_the_offending_key(tmp_path, tiny_kb):
    root = tmp_path / "rules"
    root.mkdir()
    path = write_rule(root, rule_doc(when={"all": [_d(category="hyperparameter", relevant=True,
                                                      rel_change={"gt": 5, "lt": 3})]}))
    write_cases(root, good_cases(top=None))
    text = path.read_text().splitlines()
    issue = next(i for i in lint(root, kb_path=tiny_kb) if i.code == "L001")
    assert "- fact: config_diff" in text[issue.line - 1]
    (tmp_path / "b").mkdir()
    issue = next(i for i in _run(tmp_path / "b", tiny_kb, _with(failure_modes=["config.no_such_mode"]))
                 if i.code == "R001")
    lines = Path(issue.path).read_text().splitlines()
    assert lines[issue.line - 1].startswith("failure_modes:") and "config.no_such_mode" in lines[issue.line]


def test_one_broken_file_does_not_hide_the_others(tmp_path, tiny_kb):
    root = tmp_path / "rules"
    good_pack(root)
    (root / "broken.yaml").write_text("id: [unclosed\n")
    write_rule(root, rule_doc(id="TST-002", name="two", failure_modes=["config.nope"],
                              when={"all": [_d(category="precision")]}), name="two")
    codes = {i.code for i in lint(root, kb_path=tiny_kb)}
    assert {"S001", "R001", "Q005"} <= codes


def test_compile_error_not_repeated_when_a_finer_check_named_it(tmp_path, tiny_kb):
    issues = _run(tmp_path, tiny_kb, _with_when(all=[_d(categroy="hyperparameter")]))
    assert [i.code for i in issues if i.severity == "error"] == ["R004"]


def test_issue_as_dict_and_render(tmp_path, tiny_kb):
    issues = _run(tmp_path, tiny_kb, _with(references=None))
    d = issues[0].as_dict()
    assert set(d) == {"code", "name", "severity", "rule", "path", "line", "message"}
    assert json.loads(json.dumps(d)) == d
    text = render_lint(issues)
    assert "Q002 missing-reference [TST-001]" in text and text.rstrip().endswith("0 info")


def test_cli_exit_codes(tmp_path, tiny_kb):
    from cli import main

    good = good_pack(tmp_path / "good")
    res = CliRunner().invoke(main, ["rules", "lint", "--rules", str(good)])
    assert res.exit_code == 0, res.output
    bad = tmp_path / "bad"
    write_rule(bad, rule_doc(references=None))
    write_cases(bad, good_cases(top=None))
    res = CliRunner().invoke(main, ["rules", "lint", "--rules", str(bad), "--format", "json"])
    assert res.exit_code == 1
    assert any(i["code"] == "Q002" for i in json.loads(res.output))
    warn_only = tmp_path / "warn"
    write_rule(warn_only, rule_doc(explanation={"en": "{d.name:.2f}", "zh": "{d.name:.2f} 不同"}))
    write_cases(warn_only, good_cases(top=None))
    res = CliRunner().invoke(main, ["rules", "lint", "--rules", str(warn_only)])
    assert res.exit_code == 0 and "R007" in res.output

