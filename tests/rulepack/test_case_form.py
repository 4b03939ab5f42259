"""The two forms of a rule test case and of a rule file: the full form (every field, `id` + `kind`,
`schema_version` on every rule, former field names) that people still write, and the minimal form
tools/minimise_cases.py writes (kind up front, only the fields a case needs, one schema_version per
file). Both load to the same cases and rules; the script changes nothing it cannot prove equal,
and a second run changes nothing."""
from __future__ import annotations

import importlib.util
import textwrap
from pathlib import Path

from precdx.rulepack.loader import load_rule_file
from precdx.rulepack.ruletest import load_test_file
from precdx.rulerunner import run_case

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("minimise_cases", REPO / "tools" / "minimise_cases.py")
TOOL = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(TOOL)  # run in-process: the same code as `python tools/minimise_cases.py`

FULL_CASES = textwrap.dedent("""\
    # full form, as cases were written before the minimal form
    cases:
      - id: positive-lr-doubled
        rule: CFG-001
        kind: positive
        note: a learning rate twice the baseline's
        facts:
          - {type: config_diff, pair: target~baseline, role: target, ref_role: baseline, name: lr, category: hyperparameter, baseline: "0.0003", target: "0.0006", presence: both, rel_change: 1.0, relevant: true}
        top: config.hyperparameter_mismatch
      - id: negative-nan-on-both
        rule: SYM-010
        kind: negative
        facts:
          - {type: nan_compare, run: target, role: target, against: baseline, target_nan_count: 4, baseline_nan_count: 4, target_skipped_count: 0, baseline_skipped_count: 0, target_max_nan_50: 2, baseline_max_nan_50: 2, target_max_skipped_50: 0, baseline_max_skipped_50: 0, target_overflow_events: 0, baseline_overflow_events: 0}
    """)

MINIMAL_CASES = textwrap.dedent("""\
    # full form, as cases were written before the minimal form
    schema_version: 1
    cases:
      - positive: lr-doubled
        rule: CFG-001
        note: a learning rate twice the baseline's
        facts:
          - {type: config_diff, name: lr, category: hyperparameter, baseline: '0.0003', target: '0.0006', presence: both, rel_change: 1.0, relevant: true}
        top: config.hyperparameter_mismatch
      - negative: nan-on-both
        rule: SYM-010
        facts:
          - {type: nan_compare, target_nan_count: 4, against_nan_count: 4, target_max_nan_50: 2, against_max_nan_50: 2}
    """)

RULES_PER_RULE_VERSION = textwrap.dedent("""\
    rules:
      - schema_version: 1
        id: TST-001
        name: lr-differs
        failure_modes: [config.hyperparameter_mismatch]
        when:
          all:
            - fact: nan_compare
              as: n
              where: {role: target, target_max_nan_50: {gt: {ref: n.baseline_max_nan_50}}}
        title: {en: "More NaN on the target", zh: "目标侧 NaN 更多"}
        explanation: {en: "{n.target_max_nan_50} vs {n.baseline_max_nan_50}", zh: "{n.target_max_nan_50} 对 {n.baseline_max_nan_50}"}
    """)


def _meaning(path: Path):
    return [(c.case_id, c.rule, c.kind, c.top, c.note, c.error,
             [f.model_dump(mode="json", exclude={"source"}) for f in c.facts]) for c in load_test_file(path)]


def test_full_and_minimal_cases_load_to_the_same_cases(tmp_path):
    full, small = tmp_path / "full.test.yaml", tmp_path / "small.test.yaml"
    full.write_text(FULL_CASES)
    small.write_text(MINIMAL_CASES)
    got = _meaning(full)
    assert got == _meaning(small)
    assert [c[0] for c in got] == ["CFG-001-positive-lr-doubled", "SYM-010-negative-nan-on-both"]
    assert all(c[5] is None for c in got)
    nan = got[1][6][0]
    assert nan["against_nan_count"] == 4 and nan["against_skipped_count"] == 0 and "baseline_nan_count" not in nan


def test_the_script_rewrites_full_cases_into_the_minimal_form_once(tmp_path, capsys):
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "x.test.yaml").write_text(FULL_CASES)
    (rules / "x.yaml").write_text(RULES_PER_RULE_VERSION)
    before_rules = [lr.rule for lr in load_rule_file(rules / "x.yaml")]
    assert TOOL.main([str(rules)]) == 0
    assert "2 changed" in capsys.readouterr().out
    assert (rules / "x.test.yaml").read_text() == MINIMAL_CASES
    text = (rules / "x.yaml").read_text()
    assert text.startswith("schema_version: 1\nrules:\n  - id: TST-001\n") and "baseline_max_nan_50" not in text
    after = load_rule_file(rules / "x.yaml")
    assert [lr.rule for lr in after] == before_rules and not after[0].upgraded
    assert TOOL.main(["--check", str(rules)]) == 0 and "2 same" in capsys.readouterr().out


def test_the_script_keeps_the_full_form_of_a_case_whose_id_and_kind_disagree(tmp_path):
    path = tmp_path / "odd.test.yaml"
    path.write_text(FULL_CASES.replace("kind: negative", "kind: positive"))
    before = _meaning(path)
    assert TOOL.main([str(path)]) == 0
    assert _meaning(path) == before
    assert "- id: negative-nan-on-both" in path.read_text()  # id and kind disagree: left in full form


def test_rule_file_with_schema_version_on_each_rule_still_loads_and_is_noted(tmp_path):
    path = tmp_path / "x.yaml"
    path.write_text(RULES_PER_RULE_VERSION)
    (loaded,) = load_rule_file(path)
    assert loaded.rule.schema_version == 1
    pattern = loaded.rule.when.all[0]
    assert "against_max_nan_50" in pattern.where["target_max_nan_50"]["gt"]["ref"]
    assert "{n.against_max_nan_50}" in loaded.rule.explanation.en
    assert loaded.upgraded == ("nan_compare.baseline_max_nan_50 -> against_max_nan_50",) * 3


def test_cases_in_both_forms_pass_against_the_packaged_rules(tmp_path):
    full, small = tmp_path / "full.test.yaml", tmp_path / "small.test.yaml"
    full.write_text(FULL_CASES)
    small.write_text(MINIMAL_CASES)
    cases = load_test_file(full) + load_test_file(small)
    results = [run_case(c, engine="python") for c in cases]
    assert len(results) == 4 and all(r.passed for r in results), [r.message for r in results if not r.passed]
    assert "ranked first" in results[0].message and "ranked first" in results[2].message


def test_only_short_form_cases_get_case_defaults_and_null_keeps_a_field_absent(tmp_path):
    path = tmp_path / "x.test.yaml"
    path.write_text(textwrap.dedent("""\
        cases:
          - id: insufficient-full-form
            rule: SYM-017
            kind: insufficient
            facts:
              - {type: nan_compare, run: target, role: target, target_nan_count: 3}
          - insufficient: short-form-null
            rule: SYM-017
            facts:
              - {type: nan_compare, target_nan_count: 3, against_nan_count: null}
          - positive: short-form-default
            rule: SYM-017
            facts:
              - {type: nan_compare, target_nan_count: 3}
        """))
    full, null, default = (c.facts[0] for c in load_test_file(path))
    assert full.against_nan_count is None and full.target_skipped_count is None  # as written
    assert null.against_nan_count is None and null.target_skipped_count == 0      # null: absent
    assert default.against_nan_count == 0                                          # the case default
    assert full == null.model_copy(update={"target_skipped_count": None, "against_skipped_count": None,
                                           "target_max_nan_50": None, "against_max_nan_50": None,
                                           "target_max_skipped_50": None, "against_max_skipped_50": None,
                                           "target_overflow_events": None, "against_overflow_events": None})


def test_the_script_writes_null_for_a_case_default_the_full_case_leaves_out(tmp_path):
    path = tmp_path / "x.test.yaml"
    path.write_text("cases:\n  - id: insufficient-no-baseline-count\n    rule: SYM-017\n    kind: insufficient\n"
                    "    facts:\n      - {type: nan_compare, run: target, role: target, target_nan_count: 3}\n")
    before = _meaning(path)
    assert TOOL.main([str(path)]) == 0
    text = path.read_text()
    assert "- insufficient: no-baseline-count" in text and "against_nan_count: null" in text
    assert _meaning(path) == before
