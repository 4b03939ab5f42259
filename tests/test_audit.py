"""Coverage audit: canonical modes x rules x tests x collectors, counted on small packs."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from precdx.audit import build_audit, render_audit
from tests.rulepack.builders import (
    KB_MODES, clear_engine_caches, diff_fact, good_cases, rule_doc, use_kb, write_cases, write_kb, write_rule,
)

CANONICAL = sorted(m for m, (_, canonical, _) in KB_MODES.items() if canonical)


@pytest.fixture
def kb(tmp_path, monkeypatch):
    root = use_kb(monkeypatch, write_kb(tmp_path / "kb"))
    yield root
    clear_engine_caches()


def _d(**where):
    return {"all": [{"fact": "config_diff", "as": "d", "where": where}]}


def _cases(rule_id, *kinds):
    chosen = {c["kind"]: c for c in good_cases(rule_id, top=None)}
    return [dict(chosen[k], id=f"{k}-{i}") for i, k in enumerate(kinds)]


@pytest.fixture
def pack(tmp_path, kb):
    """Canonical modes: hyperparameter (covered), precision (only a positive test; a deprecated
    rule with full tests), operator.precision_defect (two rules, one test kind each),
    aligned.within_noise (no rule). Plus an orphan rule, an observation-only rule and a broken case."""
    root = tmp_path / "rules"
    write_rule(root, rule_doc())
    write_cases(root, good_cases(top=None))
    write_rule(root, rule_doc(id="PRE-001", name="precision", failure_modes=["config.precision_mismatch"],
                              when=_d(category="precision")))
    write_cases(root, _cases("PRE-001", "positive") + [{"id": "broken", "rule": "PRE-001", "kind": "negative"}],
                name="pre-001")
    write_rule(root, rule_doc(id="PRE-002", name="precision-old", status="deprecated",
                              failure_modes=["config.precision_mismatch"], when=_d(category="precision", relevant=True)))
    write_cases(root, _cases("PRE-002", "positive", "negative"), name="pre-002")
    write_rule(root, rule_doc(id="OPD-001", name="op-a", failure_modes=["operator.precision_defect"],
                              when=_d(category="model")))
    write_cases(root, _cases("OPD-001", "positive", "positive"), name="opd-001")
    write_rule(root, rule_doc(id="OPD-002", name="op-b", failure_modes=["operator.precision_defect"],
                              when=_d(category="data")))
    write_cases(root, _cases("OPD-002", "negative", "insufficient"), name="opd-002")
    write_rule(root, rule_doc(id="ORF-001", name="orphan", failure_modes=["gone.mode"], when=_d(category="other")))
    write_rule(root, rule_doc(id="OBS-001", name="asked", failure_modes=["rl.train_infer_mismatch"],
                              when={"all": [{"fact": "observation", "where": {"name": "sgd_aligns", "value": True}}]},
                              explanation={"en": "asked", "zh": "询问"}, next_steps=None))
    return root


def test_counts(pack):
    report = build_audit(pack)
    modes = {m["id"]: m for m in report["modes"]}
    assert report["canonical_total"] == len(CANONICAL) == 4
    assert report["canonical_covered"] == 1
    assert report["coverage_percent"] == 25.0
    assert [m["id"] for m in report["modes"] if m["canonical"]] == CANONICAL

    hyper = modes["config.hyperparameter_mismatch"]
    assert hyper["covered"] and hyper["rules"] == ["TST-001"] and hyper["tested_rules"] == ["TST-001"]
    assert hyper["tests"] == {"positive": 1, "negative": 1, "insufficient": 1}
    assert hyper["collectors"] == ["checklist"] and hyper["collectable"]

    prec = modes["config.precision_mismatch"]
    assert not prec["covered"] and prec["rules"] == ["PRE-001"] and prec["deprecated_rules"] == ["PRE-002"]
    assert prec["tests"] == {"positive": 1, "negative": 0, "insufficient": 0}  # broken case not counted
    assert prec["missing"] == ["no negative test"]

    op = modes["operator.precision_defect"]
    assert op["tests"] == {"positive": 2, "negative": 1, "insufficient": 1} and op["tested_rules"] == []
    assert op["missing"] == ["no rule has both a positive and a negative test"]

    assert modes["aligned.within_noise"]["missing"] == ["no rule"]
    rl = modes["rl.train_infer_mismatch"]
    assert not rl["canonical"] and rl["rules"] == ["OBS-001"] and not rl["collectable"]

    assert {u["id"] for u in report["uncovered"]} == set(CANONICAL) - {"config.hyperparameter_mismatch"}
    assert report["orphan_rules"] == [{"id": "ORF-001", "unknown_modes": ["gone.mode"]}]
    assert report["uncollectable_rules"] == ["OBS-001"]
    assert set(report["untested_rules"]) == {"PRE-001", "OPD-001", "OPD-002", "ORF-001", "OBS-001"}
    assert "config_diff" not in report["unread_fact_types"] and "observation" not in report["unread_fact_types"]
    assert "first_divergence" in report["unread_fact_types"]
    assert [b["case_id"] for b in report["cases"]["broken"]] == ["PRE-001-broken"]
    rules = {r["id"]: r for r in report["rules"]}
    assert rules["TST-001"]["collectors"] == {"config_diff": ["checklist"]}
    assert rules["PRE-001"]["tests"] == {"positive": 1, "negative": 0, "insufficient": 0}


def test_full_coverage_and_fail_under(tmp_path, kb):
    from cli import main

    root = tmp_path / "rules"
    categories = ["hyperparameter", "precision", "model", "data"]
    for i, (mode, cat) in enumerate(zip(CANONICAL, categories)):
        rid = f"COV-00{i + 1}"
        write_rule(root, rule_doc(id=rid, name=f"cov-{i}", failure_modes=[mode], when=_d(category=cat)))
        write_cases(root, _cases(rid, "positive", "negative"), name=rid.lower())
    report = build_audit(root)
    assert report["coverage_percent"] == 100.0 and report["uncovered"] == []
    # (a four-rule pack reads few fact types: the unread-type check is tested on its own below)
    args = ["audit", "--rules", str(root), "--fail-under", "100", "--no-fail-unread"]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    (root / "cov-004.test.yaml").unlink()
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 1 and "coverage 75.0% is under 100.0%" in res.output


def test_old_ids_count_for_the_renamed_rule(tmp_path, kb):
    root = tmp_path / "rules"
    write_rule(root, rule_doc(aliases=["OLD-001"]))
    write_cases(root, [dict(c, rule="OLD-001") for c in good_cases(top=None)])
    modes = {m["id"]: m for m in build_audit(root)["modes"]}
    assert modes["config.hyperparameter_mismatch"]["covered"]


def test_canonical_override_reports_missing_kb_entries(pack):
    report = build_audit(pack, canonical_ids=["config.hyperparameter_mismatch", "hardware.faulty_node"])
    assert report["canonical_total"] == 2 and report["coverage_percent"] == 50.0
    assert report["uncovered"] == [{"id": "hardware.faulty_node", "missing": ["no kb entry", "no rule"]}]


def test_positive_test_must_target_a_supporting_rule(tmp_path, kb):
    root = tmp_path / "rules"
    write_rule(root, rule_doc())
    write_rule(root, rule_doc(id="AGN-001", name="against", failure_modes=None,
                              against=["config.precision_mismatch"], when=_d(category="precision")))
    write_cases(root, good_cases(top=None) + _cases("AGN-001", "positive", "negative"))
    modes = {m["id"]: m for m in build_audit(root)["modes"]}
    assert modes["config.precision_mismatch"]["against_rules"] == ["AGN-001"]
    assert not modes["config.precision_mismatch"]["covered"]


def test_renderings(pack):
    report = build_audit(pack)
    text = render_audit(report, "text")
    assert "canonical coverage: 1/4 (25.0%)" in text
    assert "FAILURE MODE" in text and "COLLECTORS" in text
    row = next(line for line in text.splitlines() if line.startswith("config.precision_mismatch"))
    assert "PRE-001" in row and "no negative test" in row
    assert "ORF-001: gone.mode" in text and "PRE-001-broken" in text
    md = render_audit(report, "markdown")
    assert md.startswith("# precdx coverage audit")
    assert "| FAILURE MODE | CANON |" in md and "| config.hyperparameter_mismatch | yes | yes | TST-001 |" in md
    assert "## Orphan rules (support unknown modes) (1)" in md
    assert json.loads(render_audit(report, "json")) == json.loads(json.dumps(report))


def test_cli_json(pack):
    from cli import main

    res = CliRunner().invoke(main, ["audit", "--rules", str(pack), "--format", "json", "--no-fail-unread"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["coverage_percent"] == 25.0


def test_facts_of_cases_do_not_matter_to_the_audit(tmp_path, kb):
    """The audit counts cases, it does not run them (that is `precdx rules test`)."""
    root = tmp_path / "rules"
    write_rule(root, rule_doc())
    wrong = [dict(c, facts=[diff_fact(rel_change=0.0)]) for c in good_cases(top=None)]
    write_cases(root, wrong)
    assert build_audit(root)["canonical_covered"] == 1


def test_unread_collected_fact_types_fail_the_audit(pack):
    """A collected fact type no rule reads fails `precdx audit` (unless it is on the reviewed
    descriptive list); types only a person gives (observation) do not count."""
    from cli import main
    from precdx.audit import DESCRIPTIVE_FACT_TYPES, audit_failures

    report = build_audit(pack)
    unread = set(report["unread_fact_types"])
    assert "first_divergence" in unread and "config_diff" not in unread
    assert not unread & set(DESCRIPTIVE_FACT_TYPES) and "observation" not in unread
    assert any("first_divergence is collected but no rule reads it" in p for p in audit_failures(report))
    res = CliRunner().invoke(main, ["audit", "--rules", str(pack)])
    assert res.exit_code == 1 and "first_divergence is collected but no rule reads it" in res.output


def test_shipped_pack_reads_every_collected_fact_type():
    from precdx.audit import DESCRIPTIVE_FACT_TYPES, audit_failures

    report = build_audit()
    assert report["unread_fact_types"] == [] and report["stale_descriptive"] == []
    assert audit_failures(report) == []
    assert set(report["descriptive_fact_types"]) == set(DESCRIPTIVE_FACT_TYPES)
