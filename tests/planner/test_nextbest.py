"""The next-best-evidence planner: belief and entropy, value = gain / cost, which candidates it
offers (questions, checks, experiments) and when a hypothesis dominates."""
from __future__ import annotations

import math
import textwrap

import pytest

from precdx.diagnosis import Diagnosis, Hypothesis, RuleRef, diagnose
from precdx.facts import FactSet
from precdx.facts.core import OBSERVATIONS
from precdx.planner import answer_to_fact, dominant, parse_answer, plan
from precdx.planner.costs import COST_WEIGHT, OBSERVATION_COST, fact_cost
from precdx.planner.nextbest import _number_points, belief, entropy
from precdx.errors import PrecdxError
from tests.planner.conftest import RUNS, facts_of, obs


def test_belief_is_a_distribution_over_the_modes_in_play():
    b = belief({"a": 0.8}, {"a", "b", "c"})
    assert math.isclose(sum(b.values()), 1.0)
    assert b["a"] > b["b"] == b["c"]
    assert math.isclose(entropy({}, {"a", "b", "c", "d"}), 2.0)  # flat over four modes: 2 bits
    assert entropy({"a": 0.9}, {"a", "b", "c", "d"}) < entropy({"a": 0.3}, {"a", "b", "c", "d"}) < 2.0


def test_cost_classes_are_ordered_and_every_catalogue_question_has_a_cost():
    weights = [COST_WEIGHT[c] for c in ("read", "rerun", "dump", "long_run", "cluster")]
    assert weights == sorted(weights) and len(set(weights)) == 5
    assert set(OBSERVATION_COST) == set(OBSERVATIONS), "give each catalogue question a cost in engine/planner/costs.py"
    assert fact_cost(("msprobe",)) == "dump" and fact_cost(("checklist", "msprobe")) == "read"
    assert fact_cost(("logs",), "rerun_compare") == "rerun"  # reading the log needs the rerun first
    from precdx.facts import REGISTRY
    from precdx.planner.costs import FACT_COST
    assert set(FACT_COST) <= set(REGISTRY), "FACT_COST names a fact type that does not exist"


def test_value_is_gain_per_cost_and_cheaper_evidence_wins_a_tie(pack):
    suggestions = plan(facts_of(RUNS), rules_path=pack, limit=None)
    by_id = {s.id: s for s in suggestions}
    # same_checkpoint and kshift_off_fixes each decide one 0.9-precision rule: equal gain, cost read < rerun
    same, kshift = by_id["same_checkpoint"], by_id["kshift_off_fixes"]
    assert same.gain == pytest.approx(kshift.gain, abs=1e-3)
    assert same.cost == "read" and kshift.cost == "rerun"
    assert suggestions[0].id == "same_checkpoint"
    for s in suggestions:
        assert s.value == pytest.approx(s.gain / COST_WEIGHT[s.cost], abs=1e-3)
    values = [s.value for s in suggestions]
    assert values == sorted(values, reverse=True)
    # cluster-time questions come last
    assert {s.id for s in suggestions[-2:]} == {"stress_test_failed", "tied_to_specific_nodes"}
    assert {s.cost for s in suggestions[-2:]} == {"cluster"}


def test_only_questions_some_rule_tests_are_offered(pack):
    ids = {s.id for s in plan(facts_of(RUNS), rules_path=pack, limit=None)}
    assert "lr_zero_aligns" not in ids and "downstream_metric_gap" not in ids  # no rule reads these answers
    assert {"same_checkpoint", "kshift_off_fixes", "stress_test_failed"} <= ids


def test_answered_and_skipped_questions_are_not_asked_again(pack):
    facts = facts_of([*RUNS, obs("same_checkpoint", True)])
    ids = [s.id for s in plan(facts, rules_path=pack, skipped={"kshift_off_fixes"}, limit=None)]
    assert "same_checkpoint" not in ids and "kshift_off_fixes" not in ids
    assert "overlap_off_fixes" in ids


def test_a_question_that_only_matters_after_another_answer_is_offered_then(pack):
    """reproduces_with_determinism feeds rules that also need reproduces_on_rerun=no: alone its
    answer changes nothing (no gain); once reruns are known to differ it splits the two
    determinism modes and becomes the best question."""
    before = {s.id for s in plan(facts_of(RUNS), rules_path=pack, limit=None)}
    assert "reproduces_with_determinism" not in before
    after = plan(facts_of([*RUNS, obs("reproduces_on_rerun", False)]), rules_path=pack, limit=None)
    assert after[0].id == "reproduces_with_determinism"
    assert set(after[0].modes) == {"determinism.nondeterministic_operator", "determinism.randomness_not_fixed"}


def test_questions_are_phrased_in_the_requested_language(pack):
    zh = plan(facts_of(RUNS), rules_path=pack, lang="zh", limit=1)[0]
    assert zh.text == OBSERVATIONS[zh.id][2]
    assert zh.answer == "yes_no" and zh.kind == "question"


def test_experiments_come_from_the_next_steps_of_top_hypotheses(pack):
    facts = facts_of([*RUNS, {"type": "config_diff", "pair": "target~baseline", "role": "target",
                              "ref_role": "baseline", "name": "lr", "category": "hyperparameter",
                              "baseline": "0.0003", "target": "0.0006", "presence": "both", "relevant": True}])
    suggestions = plan(facts, rules_path=pack, kinds=("experiment",), limit=None)
    assert [s.id for s in suggestions] == ["step:ASK-015:0"]
    step = suggestions[0]
    assert step.kind == "experiment" and step.cost == "rerun" and step.answer == "none"
    assert step.text == "Align lr and rerun"  # rendered with the bound fact
    assert step.modes == ["config.hyperparameter_mismatch"] and step.gain > 0


def _write(tmp_path, text: str) -> str:
    path = tmp_path / "pack.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return str(path)


CHECK_PACK = """
rules:
  - schema_version: 1
    id: CHK-001
    name: lr-set-and-diverges
    failure_modes: [config.hyperparameter_mismatch]
    precision: 0.8
    when:
      all:
        - {fact: run, where: {role: target}}
        - {fact: config_value, where: {name: lr, number: {gt: 0.001}}}
    title: {en: "Learning rate too high on the target", zh: "目标侧学习率过高"}
    explanation: {en: "lr is high."}
  - schema_version: 1
    id: CHK-002
    name: first-divergence-in-op
    failure_modes: [operator.precision_defect]
    precision: 0.8
    when:
      all:
        - {fact: run, where: {role: target}}
        - {fact: first_divergence, where: {kind: introduced}}
    title: {en: "An operator's output departs first"}
    explanation: {en: "dump says so."}
"""


def test_checks_name_the_missing_fact_and_cost_what_its_collector_costs(tmp_path):
    pack = _write(tmp_path, CHECK_PACK)
    checks = {s.id: s for s in plan(facts_of(RUNS), rules_path=pack, kinds=("check",), limit=None)}
    assert set(checks) == {"check:config_value", "check:first_divergence"}
    assert checks["check:config_value"].cost == "read"      # the checklist collector reads configs
    assert checks["check:first_divergence"].cost == "dump"  # msprobe needs a dump
    assert "`config_value`" in checks["check:config_value"].text
    assert checks["check:config_value"].rules == ["CHK-001"]
    assert checks["check:config_value"].value > checks["check:first_divergence"].value


def test_a_field_no_fact_carries_yet_is_a_check_and_a_known_value_is_not(tmp_path):
    pack = _write(tmp_path, CHECK_PACK)
    no_number = {"type": "config_value", "role": "target", "run": "target", "name": "lr", "category": "hyperparameter",
                 "value": "warmup"}
    checks = plan(facts_of([*RUNS, no_number]), rules_path=pack, kinds=("check",), limit=None)
    assert [s.id for s in checks] == ["check:config_value.number", "check:first_divergence"]
    assert "`config_value.number`" in checks[0].text
    low = dict(no_number, value="0.0001", number=0.0001)
    checks = plan(facts_of([*RUNS, low]), rules_path=pack, kinds=("check",), limit=None)
    assert [s.id for s in checks] == ["check:first_divergence"]


def test_number_questions_get_one_answer_per_threshold_interval(tmp_path):
    pack_path = _write(tmp_path, """
        rules:
          - schema_version: 1
            id: NUM-001
            name: many-steps-aligned
            failure_modes: [optimizer.update_mismatch]
            when:
              all:
                - {fact: observation, where: {name: lr_zero_aligns, number: {gt: 100}}}
            title: {en: "t"}
            explanation: {en: "e"}
          - schema_version: 1
            id: NUM-002
            name: few-steps
            failure_modes: [data.bad_sample]
            when:
              all:
                - {fact: observation, where: {name: lr_zero_aligns, number: {le: 10}}}
            title: {en: "t"}
            explanation: {en: "e"}
        """)
    from precdx.diagnosis import load_pack

    points = _number_points(load_pack(pack_path), "lr_zero_aligns")
    assert points[0] < 10 and any(10 < p < 100 for p in points) and points[-1] > 100
    assert 10 in points and 100 in points


def test_number_answers_parse_for_number_questions(monkeypatch):
    monkeypatch.setitem(OBSERVATIONS, "lr_zero_aligns", ("number",) + OBSERVATIONS["lr_zero_aligns"][1:])
    assert parse_answer("lr_zero_aligns", " 250 ") == 250.0
    assert parse_answer("lr_zero_aligns", 3) == 3.0
    assert parse_answer("lr_zero_aligns", "skip") is None
    fact = answer_to_fact("lr_zero_aligns", "12.5")
    assert fact.number == 12.5 and fact.value is None
    for bad in ("many", "nan", True):
        with pytest.raises(PrecdxError, match="lr_zero_aligns"):
            parse_answer("lr_zero_aligns", bad)


@pytest.mark.parametrize("raw,value", [("yes", True), ("Y", True), ("是", True), (True, True), ("no", False),
                                       ("否", False), (False, False), ("skip", None), ("", None), (None, None),
                                       ("不知道", None)])
def test_yes_no_answers(raw, value):
    assert parse_answer("same_checkpoint", raw) is value


def test_bad_answers_and_unknown_questions_are_clear_errors():
    with pytest.raises(PrecdxError, match="takes yes, no or skip"):
        parse_answer("same_checkpoint", "perhaps")
    with pytest.raises(PrecdxError, match="takes yes, no or skip"):
        parse_answer("same_checkpoint", 2)
    with pytest.raises(PrecdxError, match="unknown question 'same_checkpont'.*same_checkpoint"):
        parse_answer("same_checkpont", "yes")


def _diag(*scores: float) -> Diagnosis:
    hyps = [Hypothesis(failure_mode=f"m{i}", score=s, title=f"m{i}", verdict="misaligned",
                       rules=[RuleRef(id=f"R-00{i}", name="r", weight=s, supports=True)], evidence=[], next_steps=[],
                       references=[]) for i, s in enumerate(scores)]
    return Diagnosis(verdict="inconclusive", summary="", symptoms=[], hypotheses=hyps, near_misses=[], facts=[],
                     warnings=[], engine="python", rule_pack="x", lang="en")


def test_dominance_needs_a_strong_score_well_ahead_of_the_runner_up():
    assert dominant(_diag()) is None
    assert dominant(_diag(0.5)) is None
    assert dominant(_diag(0.7)).failure_mode == "m0"
    assert dominant(_diag(0.7, 0.36)) is None
    assert dominant(_diag(0.7, 0.3)).failure_mode == "m0"


def test_nothing_left_to_ask_once_every_informative_question_is_answered(pack):
    from tests.planner.conftest import CASES

    full, _ = CASES["faulty_node"]
    facts = FactSet(facts_of(full))
    diag = diagnose(facts, engine="python", rules_path=pack)
    questions = plan(facts, rules_path=pack, diag=diag, kinds=("question",), limit=None)
    asked_by_rules = {"vanishes_with_launch_blocking", "vanishes_with_dump", "reproduces_on_rerun",
                      "reproduces_with_determinism", "stress_test_failed", "tied_to_specific_nodes", "fp32_upcast_fixes",
                      "kshift_off_fixes", "overlap_off_fixes", "sgd_aligns", "same_checkpoint", "same_data_order"}
    answered = {d["name"] for d in full if d["type"] == "observation"}
    assert {q.id for q in questions} <= asked_by_rules - answered
