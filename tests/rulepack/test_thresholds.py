"""Named thresholds: the kb entry of a mode (and kb/verdict/aligned.within_noise.yaml for the
acceptance tolerances) declares each number once; rules name it, the loader puts it in, and no
rule condition writes such a number out instead of naming it."""
from __future__ import annotations

from pathlib import Path

import pytest

from precdx.errors import PrecdxError
from precdx.kb import TOLERANCES_ENTRY, load_kb, thresholds_for, tolerance
from precdx.paths import rules_dir
from precdx.rulepack.loader import load_rule_file, rule_files
from precdx.rulepack.thresholds import mode_of
from precdx.yamlsafe import load_yaml_file


def _literal_conditions(doc):
    """(rule id, fact, field, op, number) for every number written out in a condition."""
    items = doc.get("rules", [doc]) if isinstance(doc, dict) else []
    for rule in items:
        when = rule.get("when") or {}
        for part in ("all", "any", "none"):
            for pat in when.get(part) or ():
                for field, cond in (pat.get("where") or {}).items():
                    for op, value in (cond.items() if isinstance(cond, dict) else [("eq", cond)]):
                        values = value if isinstance(value, list) else [value]
                        for v in values:
                            if isinstance(v, (int, float)) and not isinstance(v, bool):
                                yield rule.get("id"), pat.get("fact"), field, op, v


def test_no_rule_condition_writes_out_a_named_threshold_of_its_mode():
    offenders = []
    for path in rule_files():
        named = thresholds_for(mode_of(path))
        by_value: dict[float, list[str]] = {}
        for name, (value, owner) in named.items():
            by_value.setdefault(abs(value), []).append(f"{name} ({owner})")
        for rid, fact, field, op, v in _literal_conditions(load_yaml_file(str(path))):
            if abs(v) in by_value and v != 0:
                offenders.append(f"{path.name}: {rid} {fact}.{field} {op} {v} -- name it: "
                                 + " or ".join(by_value[abs(v)]))
    assert not offenders, "\n".join(offenders)


def test_the_acceptance_tolerances_are_declared_once_and_used():
    kb = load_kb()
    tol = kb[TOLERANCES_ENTRY].thresholds
    assert tol["first_step_rel_err"] == 0.005 and tol["first_step_abs_err"] == 0.005
    assert tol["mean_rel_err"] == 0.01 and tol["grad_norm_rel_err"] == 0.1 and tol["acceptance_steps"] == 1000
    # a mode's own thresholds never redeclare a tolerance under the same name
    for mode, entry in kb.items():
        if mode != TOLERANCES_ENTRY:
            assert not set(entry.thresholds) & set(tol), mode
    # every declared threshold is named by some rule of its scope (nothing declared for nothing)
    used = set()
    for path in rule_files():
        used |= {name for name in thresholds_for(mode_of(path))
                 if f"threshold: {name}" in path.read_text() or f"{{threshold.{name}" in path.read_text()}
    declared = {name for entry in kb.values() for name in entry.thresholds}
    assert declared - used == set()


def test_the_logs_comparison_applies_the_kb_tolerances():
    from precdx.collectors.logs import compare

    assert compare.DEFAULT_LOSS_BAND == tolerance("step_rel_err") == 0.01
    assert compare.DEFAULT_GRAD_BAND == tolerance("grad_norm_rel_err") == 0.1


def test_the_loader_puts_the_numbers_into_conditions_and_texts():
    path = rules_dir() / "symptoms" / "first_step_difference.yaml"
    assert "{threshold.first_step_rel_err:.1%}" in path.read_text()
    rules = {lr.rule.id: lr.rule for lr in load_rule_file(path)}
    sym = rules["SYM-001"]
    assert "(absolute < 0.005 or relative < 0.5%)" in sym.explanation.en
    assert "{threshold" not in sym.explanation.en + (sym.explanation.zh or "")
    conds = [p.where for p in sym.when.any or sym.when.all]
    assert any(w.get("first_step_rel_err") == {"ge": 0.005} for w in conds), conds


def _write(tmp_path: Path, where: str, text: str = "x") -> Path:
    path = tmp_path / "data.loss_mask_mismatch.yaml"
    path.write_text(f"""schema_version: 1
rules:
  - id: TST-001
    name: t
    failure_modes: [data.loss_mask_mismatch]
    when:
      all:
        - fact: loss_compare
          as: l
          where: {where}
    title: {{en: "t", zh: "t"}}
    explanation: {{en: "{text}", zh: "{text}"}}
""")
    return path


def test_a_mode_sees_its_own_thresholds_and_the_tolerances_scaled(tmp_path):
    path = _write(tmp_path, "{mean_signed_rel_err: {le: {threshold: mean_loss_shortfall, scale: -1}}, "
                            "mean_rel_err: {gt: {threshold: mean_rel_err}}}",
                  "below {threshold.mean_loss_shortfall:.0%} and {threshold.mean_rel_err}")
    (lr,) = load_rule_file(path)
    assert lr.rule.when.all[0].where == {"mean_signed_rel_err": {"le": -0.1}, "mean_rel_err": {"gt": 0.01}}
    assert lr.rule.explanation.en == "below 10% and 0.01"


@pytest.mark.parametrize("where, message", [
    ("{mean_rel_err: {gt: {threshold: no_such_threshold}}}", "unknown threshold 'no_such_threshold'"),
    ("{mean_rel_err: {gt: {threshold: lr_rel_diff}}}", "unknown threshold 'lr_rel_diff'"),  # another mode's
    ("{mean_rel_err: {gt: {threshold: mean_rel_err, times: 2}}}", "a threshold reference is"),
])
def test_a_bad_threshold_reference_names_the_file_and_line(tmp_path, where, message):
    path = _write(tmp_path, where)
    with pytest.raises(PrecdxError, match=message) as err:
        load_rule_file(path)
    assert err.value.path == str(path) and err.value.line in (9, 10, 11)
