"""The symptom differential, the verdict from symptoms, evidence grades and declared experiments
(issue 12). Facts are written inline; the kb's presentation table is exercised both through a
small synthetic kb (the mechanism) and the real one (the product)."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from precdx import differential as dx
from precdx.diagnosis import diagnose
from precdx.errors import Warnings
from precdx.facts import FactSet, parse_fact
from precdx.kb import Presentation, load_kb


def _facts(*items: dict) -> FactSet:
    return FactSet(parse_fact(dict(i)) for i in items)


RUNS = ({"type": "run", "role": "baseline", "name": "baseline", "framework": "megatron", "device": "gpu"},
        {"type": "run", "role": "target", "name": "target", "framework": "megatron", "device": "npu"})


def loss(**kw) -> dict:
    base = {"type": "loss_compare", "run": "target", "role": "target", "against": "baseline",
            "steps_compared": 150, "first_step": 1}
    base.update(kw)
    return base


def _diag(*items, **kw):
    return diagnose(_facts(*RUNS, *items), engine="python", warnings=Warnings(), **kw)


def _texts(diag) -> list[str]:
    out = [diag.summary]
    for h in diag.hypotheses:
        out += [e.text for e in h.evidence] + [s.action for s in h.next_steps] + [s.why for s in h.next_steps]
    for s in diag.symptoms:
        out += [e.text for e in s.evidence]
    return out


# ---------------------------------------------------------------- the mechanism (synthetic kb)
def _entry(**pres) -> SimpleNamespace:
    return SimpleNamespace(verdict="misaligned", presentation=Presentation(**pres))


SYNTH = {
    "nan.a": _entry(symptoms={"nan_overflow": "typical"}, runs="target_only", onset="late", step1_magnitude="none",
                    error_shape="any", frequency="common"),
    "data.b": _entry(symptoms={"first_step_difference": "typical"}, runs="target_only", onset="step1",
                     step1_magnitude="large", error_shape="any", frequency="very_common"),
    "det.c": _entry(symptoms={"irreproducible": "typical"}, runs="rerun_differs", onset="any", step1_magnitude="any",
                    error_shape="zero_mean", frequency="common"),
    "bad.both": _entry(symptoms={"nan_overflow": "typical", "spikes": "typical"}, runs="both", onset="any",
                       step1_magnitude="none", error_shape="any", frequency="occasional"),
}


def test_no_symptom_no_differential():
    assert dx.differential(dx.Profile(), SYNTH) == []


def test_nan_on_target_ranks_nan_modes_first():
    prof = dx.Profile(symptoms={"nan_overflow"}, runs="target_only", onset="late", step1_magnitude="none")
    ranked = dx.differential(prof, SYNTH)
    assert ranked[0].mode == "nan.a" and ranked[0].weight == pytest.approx(dx.DIFFERENTIAL_CAP)
    # a NaN present on both sides points elsewhere
    prof_both = dx.Profile(symptoms={"nan_overflow"}, runs="both", onset="late", step1_magnitude="none")
    assert dx.differential(prof_both, SYNTH)[0].mode == "bad.both"


def test_procedure_order_argues_against_modes_without_nan():
    prof = dx.Profile(symptoms={"nan_overflow"}, runs="target_only")
    against = dx.procedure_against(prof, SYNTH, ["nan.a", "data.b", "det.c"])
    assert set(against) == {"data.b", "det.c"}
    assert dx.procedure_against(dx.Profile(symptoms={"nan_overflow"}, runs="both"), SYNTH, ["data.b"]) == {}


def test_profile_reads_shape_and_magnitude():
    facts = list(_facts(loss(first_step_rel_err=0.13, mean_rel_err=0.134, mean_signed_rel_err=0.134,
                             mean_rel_err_early=0.148, mean_rel_err_late=0.125, ratio_mean=1.134, ratio_cv=0.015)))
    prof = dx.build_profile(facts, {"first_step_difference", "long_run_difference"})
    assert prof.step1_magnitude == "large" and prof.onset == "step1"
    assert prof.error_shape == "constant_ratio"
    # the same gap seen later is not a second symptom
    assert prof.symptoms == {"first_step_difference"}


def test_nan_that_the_rerun_does_not_reproduce_is_irreproducible():
    facts = list(_facts(
        {"type": "log_event", "run": "target", "role": "target", "kind": "nan_in_grad", "count": 1, "step": 23},
        {"type": "rerun_compare", "role": "target", "run": "target", "rerun": "target_rerun", "steps_compared": 23,
         "identical": False, "max_rel_diff": 7e-5}))
    prof = dx.build_profile(facts, {"nan_overflow"})
    assert {"nan_overflow", "irreproducible"} <= prof.symptoms and "nan_not_reproduced" in prof.notes


# ---------------------------------------------------------------- verdict from symptoms
def test_nan_crash_is_misaligned_even_without_a_cause():
    if not any(getattr(e, "presentation", None) for e in load_kb().values()):
        pytest.skip("kb has no presentation blocks yet")
    d = _diag({"type": "log_event", "run": "target", "role": "target", "kind": "nan_in_grad", "count": 1, "step": 37},
              loss(steps_compared=37, stopped_early=True, first_step_rel_err=7e-5, mean_rel_err=3e-5))
    assert d.verdict == "misaligned"
    assert d.verdict_basis.kind == "symptoms"
    assert "nan_overflow" in d.profile.symptoms
    assert d.hypotheses, "a case with a symptom never gets an empty list"


def test_short_run_without_band_is_only_provisionally_aligned():
    d = _diag(loss(steps_compared=20, first_step_rel_err=0.0004, first_step_abs_err=0.001, mean_rel_err=0.0008,
                   mean_rel_err_early=0.0008, mean_rel_err_late=0.0008, mean_signed_rel_err=0.0001))
    assert d.verdict == "aligned" and d.verdict_basis.kind == "provisional"
    assert any("baseline rerun" in m for m in d.verdict_basis.missing)
    assert any("1000" in m for m in d.verdict_basis.missing)
    assert "provisional" in d.summary


def test_long_run_meeting_the_documented_acceptance_is_accepted():
    d = _diag(loss(steps_compared=1500, first_step_rel_err=0.0004, first_step_abs_err=0.001, mean_rel_err=0.002,
                   mean_rel_err_early=0.002, mean_rel_err_late=0.002, mean_signed_rel_err=0.0001),
              {"type": "grad_norm_compare", "run": "target", "role": "target", "against": "baseline",
               "steps_compared": 1500, "first_step_rel_err": 0.01, "mean_rel_err": 0.03})
    assert d.verdict == "aligned" and d.verdict_basis.kind == "accepted"


def test_one_sided_error_is_not_accepted():
    d = _diag(loss(steps_compared=1500, first_step_rel_err=0.0004, first_step_abs_err=0.001, mean_rel_err=0.008,
                   mean_rel_err_early=0.008, mean_rel_err_late=0.008, mean_signed_rel_err=0.008),
              {"type": "grad_norm_compare", "run": "target", "role": "target", "against": "baseline",
               "steps_compared": 1500, "mean_rel_err": 0.03})
    assert d.verdict_basis.kind != "accepted"


def test_grad_norm_gap_alone_is_a_symptom():
    d = _diag(loss(steps_compared=40, first_step_rel_err=0.0001, first_step_abs_err=0.0002, mean_rel_err=0.0003,
                   mean_rel_err_early=0.0003, mean_rel_err_late=0.0003),
              {"type": "grad_norm_compare", "run": "target", "role": "target", "against": "baseline",
               "steps_compared": 40, "first_step_rel_err": 0.655, "mean_rel_err": 0.64})
    assert d.verdict == "misaligned" and "grad_norm_difference" in d.profile.symptoms


def test_config_difference_with_matching_curves_is_a_warning_not_misaligned():
    d = _diag(loss(steps_compared=200, first_step_rel_err=0.0002, first_step_abs_err=0.0005, mean_rel_err=0.0004,
                   mean_rel_err_early=0.0004, mean_rel_err_late=0.0004, mean_signed_rel_err=0.00001),
              {"type": "library_diff", "pair": "target~baseline", "role": "target", "ref_role": "baseline",
               "package": "deepspeed", "baseline": "0.17.5", "target": "0.17.6", "key_library": True, "category": "framework"})
    assert d.verdict == "aligned"


# ---------------------------------------------------------------- evidence rows and texts
def test_no_question_marks_in_texts_and_booleans_shown():
    d = _diag({"type": "log_event", "run": "target", "role": "target", "kind": "nan_in_grad", "count": 1},
              loss(steps_compared=37, stopped_early=True, first_step_rel_err=0.02, first_step_abs_err=0.05,
                   mean_rel_err=0.02))
    for text in _texts(d):
        assert "?" not in text.replace("twice?", ""), text
    rows = [e for h in d.hypotheses for e in h.evidence] + [e for s in d.symptoms for e in s.evidence]
    assert all(e.role in (None, "target", "baseline", "target_rerun", "baseline_rerun") for e in rows)


def test_missing_field_drops_its_clause():
    from precdx.diagnosis import render_template
    fact = parse_fact({"type": "log_event", "run": "target", "role": "target", "kind": "nan_in_grad", "count": 2})
    out = render_template("The NaN check fired ({e.count} lines, first at step {e.step}); stop.", {"e": fact})
    assert "?" not in out and "step" not in out and out.endswith("stop.")


# ---------------------------------------------------------------- grades
def test_grades_follow_the_strongest_stage():
    d = _diag(loss(first_step_rel_err=0.08, first_step_abs_err=0.2, mean_rel_err=0.06, mean_rel_err_early=0.07,
                   mean_rel_err_late=0.05, mean_signed_rel_err=0.06),
              {"type": "config_diff", "pair": "target~baseline", "role": "target", "ref_role": "baseline",
               "name": "lr", "category": "hyperparameter", "baseline": "3e-4", "target": "0.003", "presence": "both",
               "rel_change": 9.0, "relevant": True, "path_only": False, "same_framework": True})
    top = d.hypotheses[0]
    assert top.failure_mode == "config.hyperparameter_mismatch" and top.grade == "checklist"
    body = json.loads(d.model_dump_json())
    assert all("grade" in h for h in body["hypotheses"])


# ---------------------------------------------------------------- declared experiments
ZERO = {"type": "config_diff", "pair": "target~baseline", "role": "target", "ref_role": "baseline",
        "name": "zero_stage", "category": "parallel", "baseline": "1", "target": "2", "presence": "both",
        "relevant": True, "path_only": False, "same_framework": True}
DRIFT = loss(steps_compared=200, first_step_rel_err=0.0002, first_step_abs_err=0.0005, mean_rel_err=0.03,
             mean_rel_err_early=0.005, mean_rel_err_late=0.06, mean_signed_rel_err=0.03)


def test_declared_change_is_the_trigger_not_the_cause():
    plain = _diag(ZERO, DRIFT)
    assert plain.hypotheses[0].failure_mode == "config.parallel_strategy_mismatch"
    mechanisms = {h.failure_mode for h in plain.hypotheses if any(r.id == "MECHANISM" for r in h.rules)}
    assert "numerics.grad_accumulation_low_precision" in mechanisms  # the only knob: its mechanisms are listed
    declared = _diag(ZERO, DRIFT, {"type": "declared_change", "name": "zero_stage", "raw": "--zero-stage"})
    modes = [h.failure_mode for h in declared.hypotheses]
    assert "config.parallel_strategy_mismatch" not in modes
    assert modes[0] in {"numerics.grad_accumulation_low_precision", "framework.optimizer_wrapper_bug",
                        "communication.unprotected_buffer", "framework.grad_norm_definition"}
    assert any("declared change" in w["message"] for w in declared.warnings)


def test_declared_switch_of_the_distributed_wrapper_ranks_its_precision_handling():
    """Accelerate's distributed_type changed on purpose (DeepSpeed -> FSDP) and the loss drifts:
    the wrappers' different master-weight / reduction precision is what to suspect, not a
    hyperparameter nobody changed."""
    wrapper = {**ZERO, "name": "distributed_type", "baseline": "DEEPSPEED", "target": "FSDP"}
    d = _diag(wrapper, DRIFT, {"type": "declared_change", "name": "distributed_type"})
    modes = [h.failure_mode for h in d.hypotheses]
    assert modes[0] in {"config.precision_mismatch", "framework.optimizer_wrapper_bug",
                        "numerics.grad_accumulation_low_precision", "framework.fsdp_mixed_precision"}
    assert "config.precision_mismatch" in modes[:3]
    assert "config.parallel_strategy_mismatch" not in modes
    precision = next(h for h in d.hypotheses if h.failure_mode == "config.precision_mismatch")
    assert any("master weights" in e.text for e in precision.evidence)
    # without the switch, the same drift names no wrapper mechanism
    assert "config.precision_mismatch" not in [h.failure_mode for h in _diag(DRIFT).hypotheses][:3]


def test_declared_library_version_points_at_its_changelog():
    d = _diag(DRIFT, {"type": "library_diff", "pair": "target~baseline", "role": "target", "ref_role": "baseline",
                      "package": "deepspeed", "baseline": "0.17.5", "target": "0.17.6", "key_library": True, "category": "framework"},
              {"type": "declared_change", "name": "deepspeed"})
    lib = next(h for h in d.hypotheses if h.failure_mode == "env.library_version_mismatch")
    assert any("changelog" in s.action for s in lib.next_steps)


def test_changed_option_through_the_cli(tmp_path):
    from click.testing import CliRunner
    from precdx.cli import main

    facts = tmp_path / "f.json"
    facts.write_text(json.dumps([*RUNS, ZERO, DRIFT]))
    res = CliRunner().invoke(main, ["diagnose", "--facts", str(facts), "--changed", "--zero-stage",
                                    "--format", "json", "--engine", "python"])
    assert res.exit_code == 0, res.output
    body = json.loads(res.output)
    assert body["hypotheses"][0]["failure_mode"] != "config.parallel_strategy_mismatch"


def test_case_yaml_declares_changes(tmp_path):
    from precdx.api import _declare_changes
    (tmp_path / "case.yaml").write_text("changed: [context-parallel-size]\n")
    facts = FactSet()
    _declare_changes(facts, str(tmp_path), (), Warnings())
    assert [f.name for f in facts] == ["context_parallel_size"]


# ---------------------------------------------------------------- the real kb
def test_every_symptom_class_yields_a_differential_with_the_real_kb():
    kb = load_kb()
    if not any(getattr(e, "presentation", None) for e in kb.values()):
        pytest.skip("kb has no presentation blocks yet")
    for symptom in dx.MISALIGNING:
        ranked = dx.differential(dx.Profile(symptoms={symptom}), kb)
        assert ranked, symptom


def test_too_few_points_give_a_tentative_differential_and_a_symptom_verdict():
    """2 points 2.7% apart: beyond the 1% tolerance, so the runs differ (misaligned, cause not yet
    determined), but too few points to establish a symptom rule: the differential stays tentative."""
    if not any(getattr(e, "presentation", None) for e in load_kb().values()):
        pytest.skip("kb has no presentation blocks yet")
    d = _diag(loss(steps_compared=2, first_step_rel_err=0.0002, first_step_abs_err=0.002, mean_rel_err=0.027,
                   mean_signed_rel_err=0.027))
    assert d.verdict == "misaligned" and not d.profile.symptoms
    assert d.verdict_basis.kind == "symptoms" and "only 2 compared step" in d.verdict_basis.text
    assert "cause not yet determined" in d.verdict_basis.text
    assert d.hypotheses and all(h.score <= dx.TENTATIVE_CAP for h in d.hypotheses)
    assert "tentative" in d.profile.text


def test_few_points_without_a_gap_are_aligned_provisionally():
    d = _diag(loss(steps_compared=1, first_step=1, last_step=1, first_step_rel_err=0.001, mean_rel_err=0.001,
                   max_rel_err=0.001))
    assert d.verdict == "aligned" and d.verdict_basis.kind == "provisional"
    assert d.hypotheses[0].failure_mode == "aligned.within_noise"
    assert any("1000 compared steps (have 1)" in m for m in d.verdict_basis.missing)
    # no signed error given: the basis asks for it instead of calling the error one-sided
    assert not any("one-sided" in m for m in d.verdict_basis.missing)


def test_grad_norm_gap_on_one_point_is_tentative_and_names_the_definition():
    d = _diag(loss(steps_compared=1, first_step=1, last_step=1, first_step_rel_err=0.0, mean_rel_err=0.0,
                   max_rel_err=0.0),
              {"type": "grad_norm_compare", "run": "target", "role": "target", "against": "baseline",
               "steps_compared": 1, "first_step_rel_err": 0.54, "mean_rel_err": 0.54, "max_rel_err": 0.54})
    assert "grad_norm_difference" in d.profile.text or "grad-norm" in d.profile.text
    assert not d.profile.symptoms
    assert d.hypotheses[0].failure_mode == "framework.grad_norm_definition"


def test_a_difference_with_the_same_value_on_both_sides_is_named_and_left_out():
    w = Warnings()
    d = diagnose(_facts(*RUNS, loss(steps_compared=100, first_step_rel_err=0.001, mean_rel_err=0.01,
                                    first_divergence_step=10, mean_signed_rel_err=0.01),
                        {"type": "config_diff", "pair": "target~baseline", "role": "target", "ref_role": "baseline",
                         "name": "mixed_precision_param", "category": "precision", "baseline": "bfloat16",
                         "target": "bfloat16", "presence": "both", "relevant": True}),
                 engine="python", warnings=w)
    assert any("same value on both sides" in i["message"] and "mixed_precision_param" in i["message"] for i in w.items)
    assert all("CFG-003" not in [r.id for r in h.rules] for h in d.hypotheses)


def test_a_difference_in_white_space_is_a_difference_and_a_response_template_says_sft():
    """trl#1920's case: 'Answer:' against 'Answer: ' tokenises differently (the loss mask starts
    elsewhere). The difference stays, and it tells that the job is instruction tuning, where a
    loss-mask difference is at home."""
    w = Warnings()
    d = diagnose(_facts(*RUNS, loss(steps_compared=50, first_step_rel_err=0.5, mean_rel_err=0.5,
                                    mean_signed_rel_err=-0.5, first_divergence_step=1),
                        {"type": "config_diff", "pair": "target~baseline", "role": "target", "ref_role": "baseline",
                         "name": "response_template", "category": "data", "baseline": "Answer:",
                         "target": "Answer: ", "presence": "both", "relevant": True}),
                 engine="python", warnings=w)
    assert not any("same value on both sides" in i["message"] for i in w.items)
    reading = dx.read_scopes(list(_facts({"type": "config_diff", "pair": "target~baseline", "role": "target",
                                          "ref_role": "baseline", "name": "response_template", "category": "data",
                                          "baseline": "Answer:", "target": "Answer: ", "presence": "both",
                                          "relevant": True})))["sft"]
    assert reading.present is True and "response_template" in reading.basis
    assert "data.loss_mask_mismatch" in [h.failure_mode for h in d.hypotheses[:3]]


FSDP_DIFF = {"type": "config_diff", "pair": "target~baseline", "role": "target", "ref_role": "baseline", "name": "fsdp",
             "category": "parallel", "baseline": "false", "target": "true", "presence": "both", "relevant": True,
             "same_framework": True}
FLAT = loss(steps_compared=120, last_step=120, first_step_rel_err=0.001, mean_rel_err=0.002, max_rel_err=0.006,
            mean_signed_rel_err=0.0001)


def test_matching_curves_do_not_clear_a_difference_that_shows_only_downstream():
    """Guide 3.1.1: FSDP on one side, DDP on the other, the curves agree, the model is worse.
    Without an evaluation the curves cannot clear such a difference: the verdict rests on it,
    with 'harmless downstream' as the alternative and the evaluation as what would settle it."""
    d = _diag(FSDP_DIFF, FLAT)
    assert d.verdict == "misaligned" and d.verdict_basis.kind == "evidence"
    assert "downstream" in d.verdict_basis.text and "config.parallel_strategy_mismatch" in d.verdict_basis.text
    assert any("downstream evaluation" in m for m in d.verdict_basis.missing)
    modes = [h.failure_mode for h in d.hypotheses]
    assert modes[0] == "config.parallel_strategy_mismatch" and "aligned.within_noise" in modes[:3]
    # an evaluation that shows no gap clears it: aligned (the difference is a warning)
    same = {"type": "eval_gap", "pair": "target~baseline", "role": "target", "ref_role": "baseline",
            "metric": "accuracy", "baseline": 0.61, "target": 0.612, "abs_gap": 0.002, "rel_gap": 0.0033,
            "higher_is_better": True, "target_worse": False}
    assert _diag(FSDP_DIFF, FLAT, same).verdict == "aligned"
    # a difference declared as the experiment is no finding
    assert _diag(FSDP_DIFF, FLAT, {"type": "declared_change", "name": "fsdp"}).verdict == "aligned"


def test_unmeasured_noise_does_not_clear_a_relevant_configuration_difference():
    """Two logs over a short run agree within 1%, but the target's adam_eps differs: with no noise
    band measured the curves cannot show the difference is harmless, and the configuration check
    must pass before accuracy is compared. Misaligned on that finding, 'harmless' second; a
    measured noise band that holds the error, or the change declared, settles it as aligned."""
    eps = {**FSDP_DIFF, "name": "adam_eps", "category": "hyperparameter", "baseline": "1e-08",
           "target": "0.00025", "rel_change": 25000.0}
    short = loss(steps_compared=24, last_step=24, first_step_rel_err=0.0004, mean_rel_err=0.003,
                 max_rel_err=0.006, mean_signed_rel_err=0.003)
    d = _diag(eps, short)
    assert d.verdict == "misaligned" and d.verdict_basis.kind == "evidence"
    assert "adam_eps" in d.verdict_basis.text and "no noise band" in d.verdict_basis.text
    assert any("--changed" in m for m in d.verdict_basis.missing)
    modes = [h.failure_mode for h in d.hypotheses]
    assert modes[:2] == ["config.hyperparameter_mismatch", "aligned.within_noise"]
    assert "most likely" in d.summary and "config.hyperparameter_mismatch" in d.summary
    # what splits the two is a run with adam_eps aligned, not a dump of a step where nothing diverges
    assert d.split_step.id == "align_difference" and d.split_step.cost == "rerun"
    assert "adam_eps" in d.split_step.action
    assert set(d.split_step.modes) == {"config.hyperparameter_mismatch", "aligned.within_noise"}
    # the error inside a band the baseline's rerun measured: the curves do clear it (a warning)
    banded = dict(short, noise_band=0.01, within_noise_band=True)
    w = Warnings()
    d = diagnose(_facts(*RUNS, eps, banded), engine="python", warnings=w)
    assert d.verdict == "aligned"
    assert any("no visible effect" in i["message"] for i in w.items)
    # declared as the experiment: no finding, aligned provisionally
    assert _diag(eps, short, {"type": "declared_change", "name": "adam_eps"}).verdict == "aligned"
    # a path that differs only in its folder is no relevant difference
    path = {**FSDP_DIFF, "name": "data_path", "category": "data", "baseline": "/a/x_text_document",
            "target": "/b/x_text_document", "relevant": False, "path_only": True}
    assert _diag(path, short).verdict == "aligned"


def test_a_finding_whose_steps_name_no_rerun_is_split_by_a_rerun_with_it_aligned():
    """The curves agree, the verdict rests on a data setting that differs (DAT-002, whose own steps
    are reads): what splits 'it matters' from 'harmless' is the target run again with that setting
    as on the baseline, over the same steps, not a dump of a step where nothing diverges."""
    data = {**FSDP_DIFF, "name": "data_path", "category": "data", "baseline": "/data/a_text_document",
            "target": "/data/b_text_document"}
    short = loss(steps_compared=24, last_step=24, first_step_rel_err=0.0004, mean_rel_err=0.003,
                 max_rel_err=0.006, mean_signed_rel_err=0.003)
    d = _diag(data, short)
    assert d.verdict == "misaligned" and d.verdict_basis.kind == "evidence"
    assert [h.failure_mode for h in d.hypotheses[:2]] == ["data.input_mismatch", "aligned.within_noise"]
    assert not any(st.cost == "rerun" for st in d.hypotheses[0].next_steps)  # (the rule names reads only)
    s = d.split_step
    assert s.id == "align_difference" and s.cost == "rerun" and s.command is None
    assert "'data_path' = /data/a_text_document" in s.action and "24 steps" in s.action
    assert set(s.modes) == {"data.input_mismatch", "aligned.within_noise"}
    zh = diagnose(_facts(*RUNS, data, short), engine="python", lang="zh").split_step
    assert zh.id == "align_difference" and "data_path" in zh.action and "target_rerun/" in zh.action
    # a setting only the target sets: aligning it is leaving it unset
    only = {**data, "baseline": "<unset>", "presence": "target_only"}
    assert "'data_path' unset as on the baseline" in _diag(only, short).split_step.action


def test_an_evaluation_without_a_consistent_gap_is_aligned_provisionally():
    gaps = [{"type": "eval_gap", "pair": "target~baseline", "role": "target", "ref_role": "baseline", "metric": m,
             "baseline": b, "target": t, "abs_gap": t - b, "rel_gap": (t - b) / b, "higher_is_better": True,
             "target_worse": t < b} for m, b, t in (("exact_match", 3.2, 3.0), ("rougeL", 26.13, 26.58))]
    d = _diag(*gaps)
    assert d.verdict == "aligned" and d.verdict_basis.kind == "provisional"
    assert "downstream evaluation" in d.verdict_basis.text
    assert any("training logs" in m for m in d.verdict_basis.missing)
    worse = [dict(g, target=g["baseline"] * 0.8, rel_gap=-0.2, abs_gap=-0.2 * g["baseline"], target_worse=True)
             for g in gaps]
    assert _diag(*worse).verdict == "misaligned"


# ---------------------------------------------------------------- scopes: what kind of job it is
def _cv(role: str, name: str, value: str, category: str = "model") -> dict:
    return {"type": "config_value", "role": role, "run": role, "name": name, "value": value, "category": category}


def _both(name: str, value: str, category: str = "model") -> list[dict]:
    return [_cv("baseline", name, value, category), _cv("target", name, value, category)]


def _scopes(*items) -> dict:
    return dx.read_scopes(list(_facts(*RUNS, *items)))


def test_scopes_are_read_from_config_values_dumps_and_logs():
    nothing = _scopes()
    assert all(r.present is None for r in nothing.values()), nothing
    # a dense model: its settings were read and name no experts; a MoE model: an expert count
    dense = _scopes(*_both("num_layers", "32"), *_both("hidden_size", "4096"))
    assert dense["moe"].present is False and "no experts" in dense["moe"].basis
    assert _scopes(*_both("num_experts", "8"))["moe"].present is True
    assert _scopes(*_both("num_experts", "1"))["moe"].present is False
    # Megatron prints moe_router_topk 2 for a dense model too (and no num_experts): not a MoE
    assert _scopes(*_both("moe_router_topk", "2"))["moe"].present is False
    # an expert count under a key of its own (a nested MindFormers-style setting), or EP > 1
    nested = _both("moe_config.expert_num", "8")
    assert _scopes(*nested)["moe"] == dx.ScopeReading(True, "moe_config.expert_num 8")
    assert _scopes(*_both("expert_model_parallel_size", "4", "parallel"))["moe"].present is True
    assert _scopes(*_both("expert_model_parallel_size", "1", "parallel"))["moe"].present is None
    # an expert API in a dump says MoE even without a config
    fd = {"type": "first_divergence", "run": "target", "role": "target", "against": "baseline", "step": 0,
          "rank": 0, "api": "Module.layers.3.mlp.experts.gate_up.forward.0", "api_name": "Module.layers.3.mlp.experts",
          "kind": "introduced", "reason": "output_error", "method": "ours"}
    assert _scopes(fd)["moe"].present is True
    # a dense SwiGLU's gate projection is not a router
    assert _scopes({**fd, "api_name": "Module.layers.3.mlp.gate_proj"})["moe"].present is None
    # sequence parallelism needs the flag and TP > 1
    assert _scopes(*_both("sequence_parallel", "true", "parallel"),
                   *_both("tensor_model_parallel_size", "4", "parallel"))["sequence_parallel"].present is True
    assert _scopes(*_both("sequence_parallel", "true", "parallel"),
                   *_both("tensor_model_parallel_size", "1", "parallel"))["sequence_parallel"].present is False
    assert _scopes(*_both("sequence_parallel", "false", "parallel"))["sequence_parallel"].present is False
    # one side's config alone does not clear it
    assert _scopes(_cv("target", "sequence_parallel", "false", "parallel"),
                   _cv("baseline", "seed", "1", "other"))["sequence_parallel"].present is None
    # fp16: the flag, or a log whose loss scale moves; bf16 everywhere, or a scale pinned at 1.0
    assert _scopes(*_both("fp16", "true", "precision"))["fp16"].present is True
    assert _scopes(*_both("bf16", "true", "precision"))["fp16"].present is False
    trend = {"type": "loss_scale_trend", "run": "target", "role": "target", "values_from": "log", "trend": "falling",
             "first": 65536.0, "last": 1.0, "min": 1.0, "max": 65536.0, "n_decreases": 16}
    assert _scopes(trend)["fp16"].present is True
    flat = [{**trend, "run": r, "role": r, "trend": "stable", "first": 1.0, "last": 1.0, "max": 1.0, "n_decreases": 0}
            for r in ("baseline", "target")]
    assert _scopes(*flat)["fp16"].present is False
    # several cards: a parallel size above one; world size 1 on both sides says one card
    assert _scopes(*_both("world_size", "8", "parallel"))["multi_card"].present is True
    assert _scopes(*_both("world_size", "1", "parallel"))["multi_card"].present is False


def test_a_mode_outside_the_jobs_scope_leaves_the_differential_and_an_unknown_scope_says_so():
    """A long-run gap with nothing specific: the MoE router is a candidate only for a MoE model.
    Known dense: it drops out; known MoE: full weight; unknown: reduced, and its evidence says what
    is not known."""
    gap = loss(first_step_rel_err=0.0002, mean_rel_err=0.03, mean_signed_rel_err=0.03, mean_rel_err_early=0.01,
               mean_rel_err_late=0.012, first_departed_step=60)
    mode = "numerics.moe_router_precision"

    def weight(d):
        return next((h.score for h in d.hypotheses if h.failure_mode == mode), 0.0)

    moe = _diag(gap, *_both("num_experts", "64"))
    dense = _diag(gap, *_both("num_layers", "32"), *_both("hidden_size", "4096"))
    unknown = _diag(gap)
    assert weight(moe) > 0.2 and weight(unknown) < weight(moe) and weight(dense) == 0.0
    h = next(h for h in moe.hypotheses if h.failure_mode == mode)
    assert any("Applies only when the model is a mixture of experts; the facts say it does here (num_experts 64)"
               in e.text for e in h.evidence)
    zh = _diag(gap, *_both("num_experts", "64"), lang="zh")
    h = next(h for h in zh.hypotheses if h.failure_mode == mode)
    assert any("仅当模型为 MoE（混合专家）时适用" in e.text and "材料显示如此" in e.text for e in h.evidence)


def test_scope_vocabulary_is_one_list():
    from typing import get_args

    field = Presentation.model_fields["scope"].annotation
    names = {a for arg in get_args(field) for a in get_args(arg)}
    assert names == set(dx.SCOPES)
    scoped = {m: e.presentation.scope for m, e in load_kb().items()
              if getattr(e, "presentation", None) is not None and e.presentation.scope}
    assert scoped["numerics.moe_router_precision"] == "moe"
    assert scoped["framework.sequence_parallel_grad_unreduced"] == "sequence_parallel"
    assert scoped["numerics.loss_scale_collapse"] == "fp16"
    assert scoped["determinism.communication_nondeterministic"] == "multi_card"


def test_scope_factor_on_a_synthetic_presentation():
    """Known in scope: full weight; unknown: the scope's share of jobs; known out: SCOPE_ABSENT.
    The evidence sentence says which, in both languages."""
    pres = Presentation(symptoms={"long_run_difference": "typical"}, runs="target_only", onset="any",
                        step1_magnitude="any", error_shape="any", frequency="common", scope="moe")
    base = dx.Profile(symptoms={"long_run_difference"}, runs="target_only")
    known = dx.Profile(symptoms={"long_run_difference"}, runs="target_only",
                       scopes={"moe": dx.ScopeReading(True, "num_experts 8")})
    out = dx.Profile(symptoms={"long_run_difference"}, runs="target_only",
                     scopes={"moe": dx.ScopeReading(False, "num_experts 1")})
    full = dx.score_mode(pres, known)
    assert dx.score_mode(pres, base) == pytest.approx(full * dx.SCOPES["moe"][0])
    assert dx.score_mode(pres, out) == pytest.approx(full * dx.SCOPE_ABSENT)
    assert "nothing read tells whether it does here" in dx.describe_scope("moe", base)
    assert "the facts say it does not here (num_experts 1)" in dx.describe_scope("moe", out)
    assert "无法判断" in dx.describe_scope("moe", base, "zh")
    assert dx.describe_scope(None, base) == "" and dx.scope_factor(None, base) == 1.0


# ---------------------------------------------------------------- one run, nothing to compare with
def test_one_run_alone_gets_a_prior_differential_and_the_baseline_as_its_split_step():
    """One target log that looks healthy, no baseline: no gap can be measured, so the verdict stays
    inconclusive; the modes are ranked by prior (capped low, said to be priors) and the step that
    splits them is the baseline's log."""
    target_only = ({"type": "run", "role": "target", "name": "target", "framework": "megatron", "device": "npu",
                    "has_log": True},)
    d = diagnose(_facts(*target_only), engine="python", warnings=Warnings())
    assert d.verdict == "inconclusive"
    assert d.hypotheses and all(h.score <= dx.PRIOR_CAP and h.grade == "prior" for h in d.hypotheses)
    assert all(any(e.fact == "prior" and "Nothing to compare with" in e.text for e in h.evidence) for h in d.hypotheses)
    scores = [h.score for h in d.hypotheses]
    assert scores == sorted(scores, reverse=True)
    assert d.split_step is not None and d.split_step.id == "baseline" and d.split_step.cost == "read"
    assert "nothing to compare this run with" in d.summary and d.hypotheses[0].failure_mode in d.summary
    # a dense model known from its config: the MoE router is not among the priors
    dense = diagnose(_facts(*target_only, _cv("target", "num_layers", "32"), _cv("target", "hidden_size", "4096")),
                     engine="python", warnings=Warnings())
    assert "numerics.moe_router_precision" not in {h.failure_mode for h in dense.hypotheses}
    zh = diagnose(_facts(*target_only), engine="python", warnings=Warnings(), lang="zh")
    assert "没有参照运行" in zh.summary and zh.split_step.id == "baseline"


def test_with_a_baseline_log_the_prior_differential_stays_out():
    """Both logs with a comparison: the usual path (a NaN on the target ranks NaN modes, and the
    split step is never the baseline that is already there)."""
    d = _diag(loss(first_step_rel_err=0.0002, mean_rel_err=0.0004, mean_signed_rel_err=0.0001))
    assert not any(e.fact == "prior" for h in d.hypotheses for e in h.evidence)
    assert d.split_step is None or d.split_step.id != "baseline"
    assert not dx.without_reference(list(_facts(*RUNS, loss())))
    # a baseline that brought a log counts as a reference even where no steps were compared
    runs = [{**r, "has_log": True} for r in RUNS]
    assert not dx.without_reference(list(_facts(*runs)))
    assert dx.without_reference(list(_facts(*RUNS)))  # (runs without any artefact: nothing to compare)
    # ... but no artefact at all is a consultation's start, not one run alone: no priors there
    assert not dx.one_run_alone(list(_facts(*RUNS)))
    assert not _diag().hypotheses


def test_a_nan_in_one_runs_own_curve_ranks_the_nan_modes_not_the_priors():
    """One run alone whose loss turns NaN at step 40: that NaN is a symptom of the run itself (the
    baseline's side unknown), so the NaN modes are ranked at the tentative weight and no prior
    evidence is given; the split step is not the baseline (a dump of the target alone localises
    the first NaN)."""
    target_only = ({"type": "run", "role": "target", "name": "target", "framework": "megatron", "device": "npu",
                    "has_log": True},
                   {"type": "run_health", "run": "target", "role": "target", "first_step": 1, "loss_points": 39,
                    "first_nan_step": 40, "first_nonfinite_loss_step": 40})
    d = diagnose(_facts(*target_only), engine="python", warnings=Warnings())
    assert d.profile.text.startswith("in the target's own curve (nothing to compare it with): S3 NaN/overflow")
    modes = [h.failure_mode for h in d.hypotheses]
    assert modes and modes[0].startswith("nan.") and "nan.previous_step_backward" in modes
    assert not any(e.fact == "prior" for h in d.hypotheses for e in h.evidence)
    assert all(h.score <= dx.TENTATIVE_CAP for h in d.hypotheses if {r.id for r in h.rules if r.supports} == {"DIFFERENTIAL"})
    assert d.split_step is None or d.split_step.id != "baseline"
    prof = dx.build_profile(list(_facts(*target_only)), [])
    assert prof.own == {"nan_overflow"} and prof.onset == "late" and not prof.symptoms
    assert d.profile.own == ["nan_overflow"] and d.profile.symptoms == []  # (in the JSON too)


def test_two_logs_with_no_common_step_get_priors_a_warning_and_an_overlapping_rerun(tmp_path):
    """Two Megatron logs, the target's steps 5001-5020 and the baseline's 1-20: nothing compared.
    The collector says so (both ranges, both files), the diagnosis ranks by prior and asks for an
    overlapping rerun first."""
    from tests.corpus.healthy import MEGATRON_LINE, loss_at

    for side, offset in (("baseline", 0), ("target", 5000)):
        (tmp_path / side).mkdir()
        lines = [MEGATRON_LINE.format(sec=s % 60, s=s + offset, c=8 * s, loss=loss_at(s)) for s in range(1, 21)]
        (tmp_path / side / "train.log").write_text("\n".join(lines) + "\n")
    from precdx.pipeline import collect, discover

    w = Warnings()
    facts = collect(discover(target=tmp_path / "target", baseline=tmp_path / "baseline", warnings=w), w)
    said = [item["message"] for item in w.items if "no step in common" in item["message"]]
    assert said == ["run 'target' logs steps 5001-5020 and 'baseline' 1-20: no step in common, so their curves "
                    "were not compared (log an overlapping range: rerun one side over the other's steps)"]
    assert dx.no_common_steps(list(facts)) and not dx.one_run_alone(list(facts))
    d = diagnose(facts, engine="python", warnings=w)
    assert d.verdict == "inconclusive" and d.hypotheses
    assert all(any(e.fact == "prior" and e.text.startswith("The two logs share no step") for e in h.evidence)
               for h in d.hypotheses)
    assert d.summary.startswith("Inconclusive: the two logs share no step")
    assert d.split_step.id == "common_steps" and d.split_step.cost == "rerun"
    # overlapping logs: no such warning, no such step
    (tmp_path / "target" / "train.log").write_text("\n".join(
        MEGATRON_LINE.format(sec=s % 60, s=s, c=8 * s, loss=loss_at(s, 0.001)) for s in range(1, 21)) + "\n")
    w = Warnings()
    facts = collect(discover(target=tmp_path / "target", baseline=tmp_path / "baseline", warnings=w), w)
    assert not any("no step in common" in item["message"] for item in w.items)
    assert not dx.no_common_steps(list(facts))


def test_a_scope_question_settles_what_the_artefacts_leave_unknown():
    """'Is the model MoE?' answered: the scope is read from the answer when nothing collected tells,
    and the collected facts win where they do; the planner weighs the question when a scoped mode
    is in play."""
    from precdx.planner.nextbest import plan

    def said(name: str, value: bool) -> dict:
        return {"type": "observation", "name": name, "value": value}

    assert _scopes(said("model_is_moe", True))["moe"] == dx.ScopeReading(True, "as answered")
    assert _scopes(said("model_is_moe", False))["moe"].present is False
    assert _scopes(said("trains_in_fp16", True))["fp16"].present is True
    assert _scopes(said("sequence_parallel_on", False))["sequence_parallel"].present is False
    assert _scopes(said("several_cards", False))["multi_card"].present is False
    # the config read says 64 experts: an answer of "no" does not overrule it, and is named
    r = _scopes(said("model_is_moe", False), *_both("num_experts", "64"))["moe"]
    assert (r.present, r.basis, r.answered) == (True, "num_experts 64", False)
    w = Warnings()
    diagnose(_facts(*RUNS, said("model_is_moe", False), *_both("num_experts", "64")), engine="python", warnings=w)
    assert ["'model_is_moe' was answered no, but num_experts 64 says otherwise; what the artefacts say is used"] == [
        i["message"] for i in w.items if "model_is_moe" in i["message"]]
    gap = loss(first_step_rel_err=0.0002, mean_rel_err=0.03, mean_signed_rel_err=0.03, mean_rel_err_early=0.01,
               mean_rel_err_late=0.012, first_departed_step=60)
    mode = "numerics.moe_router_precision"
    yes = next(h.score for h in _diag(gap, said("model_is_moe", True)).hypotheses if h.failure_mode == mode)
    assert yes > 0.2 and mode not in {h.failure_mode for h in _diag(gap, said("model_is_moe", False)).hypotheses}
    asked = {s.id: s for s in plan(_facts(*RUNS, gap), limit=None, kinds=("question",))}
    assert "model_is_moe" in asked and asked["model_is_moe"].gain > 0 and asked["model_is_moe"].cost == "read"
    # once answered, or known from the config, it is not asked
    for known in ([said("model_is_moe", False)], _both("num_experts", "64")):
        assert "model_is_moe" not in {s.id for s in plan(_facts(*RUNS, gap, *known), limit=None, kinds=("question",))}


def test_an_inconclusive_answer_without_a_cause_says_what_is_missing():
    """No hypothesis and no curves compared: the summary says which (no log on a side, or logs
    without a common step) and what is needed, instead of a generic request."""
    rerun = {"type": "rerun_compare", "role": "target", "run": "target", "rerun": "target_rerun", "steps_compared": 20,
             "identical": True, "first_step_identical": True, "max_rel_diff": 0.0, "mean_rel_diff": 0.0}
    d = _diag(rerun)
    assert d.verdict == "inconclusive" and not d.hypotheses
    assert d.summary == ("Inconclusive: No training curves were compared (the case lacks a training log on one side "
                         "or both), and no cause is indicated yet; needed: two training logs (baseline and target) "
                         "with at least a few common steps.")
    zh = _diag(rerun, lang="zh")
    assert zh.summary.startswith("无法定论：没有可比较的训练曲线（两侧的训练日志不全）") and "需要：" in zh.summary


def test_a_reported_symptom_joins_the_nan_of_one_runs_own_curve():
    """One run alone with a NaN in its curve, and a person reporting a downstream gap: both count
    (the gap is secondary to the NaN), so the NaN modes still lead."""
    target_only = ({"type": "run", "role": "target", "name": "target", "framework": "megatron", "device": "npu",
                    "has_log": True},
                   {"type": "run_health", "run": "target", "role": "target", "first_step": 1, "loss_points": 39,
                    "first_nan_step": 40, "first_nonfinite_loss_step": 40},
                   {"type": "observation", "name": "downstream_metric_gap", "value": True})
    d = diagnose(_facts(*target_only), engine="python", warnings=Warnings())
    assert d.profile.own == ["nan_overflow"] and "downstream_gap" in d.profile.symptoms
    assert d.hypotheses[0].failure_mode.startswith("nan.")
    prof = dx.build_profile(list(_facts(*target_only)), [])
    assert prof.secondary("downstream_gap")  # (the NaN seen in the run's own curve explains it)


# ---------------------------------------------------------------- what the logs show to be equal
_HYPER = {"lr": 3e-4, "min_lr": 3e-5, "lr_decay_style": "cosine", "lr_warmup_iters": 10, "train_iters": 110,
          "global_batch_size": 8, "micro_batch_size": 1, "weight_decay": 0.1, "adam_beta1": 0.9,
          "adam_beta2": 0.95, "adam_eps": 1e-8, "clip_grad": 1.0}


def _values(names, roles=("baseline", "target")) -> list[dict]:
    return [{"type": "config_value", "role": r, "run": r, "name": n, "category": "hyperparameter", "value": str(v)}
            for r in roles for n, v in ((n, _HYPER[n]) for n in names)]


def test_a_thorough_clean_checklist_argues_harder_than_a_short_one():
    modes = ["config.hyperparameter_mismatch", "config.fused_kernel_mismatch", "data.input_mismatch"]
    full = list(_facts(*RUNS, *_values(_HYPER)))
    assert dx.checklist_against(full, None, set(), modes) == {
        "config.hyperparameter_mismatch": dx.CHECKLIST_COVERED_AGAINST,
        "config.fused_kernel_mismatch": dx.CHECKLIST_CLEAN_AGAINST}
    # a short override file names a few settings: "found nothing" is a lighter argument
    few = list(_facts(*RUNS, *_values(["lr", "global_batch_size", "clip_grad"])))
    assert dx.checklist_against(few, None, set(), modes)["config.hyperparameter_mismatch"] == dx.CHECKLIST_CLEAN_AGAINST
    # the settings must be named on both sides
    one_side = list(_facts(*RUNS, *_values(_HYPER, roles=("target",)), *_values(["lr"], roles=("baseline",))))
    assert dx.checklist_against(one_side, None, set(), modes)["config.hyperparameter_mismatch"] == dx.CHECKLIST_CLEAN_AGAINST
    # a relevant difference of the category is no clean look, though no rule of the mode fired
    differs = full + list(_facts({"type": "config_diff", "role": "target", "against_role": "baseline", "name": "lr",
                                  "category": "hyperparameter", "baseline": "3e-4", "target": "1e-4",
                                  "presence": "both", "relevant": True}))
    assert dx.checklist_against(differs, None, set(), modes)["config.hyperparameter_mismatch"] == dx.CHECKLIST_CLEAN_AGAINST
    # a mode a rule supports is not argued against at all
    assert "config.hyperparameter_mismatch" not in dx.checklist_against(full, None, {"config.hyperparameter_mismatch"},
                                                                         modes)


def test_two_logs_that_agree_on_settings_and_checkpoint_rank_the_operator_higher():
    """Scenario case-01's logs alone (a 1.3 % first-step gap, one-sided): the echoed arguments agree
    and both load tinygpt-mcore at iteration 0, so a hyperparameter difference and different
    initial weights fall below an operator's precision."""
    ckpt = [{"type": "config_value", "role": r, "run": r, "name": "load", "category": "model", "value": v}
            for r, v in (("baseline", "/data/ckpt/tinygpt-mcore"), ("target", "/home/u/data/ckpt/tinygpt-mcore"))]
    health = [{"type": "run_health", "role": r, "run": r, "first_step": 1, "first_loss": 2.45, "loads_checkpoint": True}
              for r in ("baseline", "target")]
    same = {"type": "config_diff", "role": "target", "against_role": "baseline", "name": "load", "category": "model",
            "baseline": "/data/ckpt/tinygpt-mcore", "target": "/home/u/data/ckpt/tinygpt-mcore", "presence": "both",
            "relevant": False, "path_only": True}
    gap = loss(steps_compared=110, first_step_rel_err=0.0134, first_step_abs_err=0.0328, mean_rel_err=0.0037,
               mean_rel_err_early=0.0056, mean_rel_err_late=0.0029, mean_signed_rel_err=0.0037, ratio_mean=1.0037,
               ratio_cv=0.0024, first_departed_step=1)
    bare = _diag(gap)
    told = _diag(gap, *_values(_HYPER), *ckpt, *health, same)
    rank = {h.failure_mode: i for i, h in enumerate(told.hypotheses)}
    before = {h.failure_mode: i for i, h in enumerate(bare.hypotheses)}
    assert rank["operator.precision_defect"] < before["operator.precision_defect"]
    for mode in ("config.hyperparameter_mismatch", "model.weight_init_mismatch"):
        assert rank.get(mode, 99) > rank["operator.precision_defect"] > -1
        assert before[mode] < before["operator.precision_defect"]
    wi = next(h for h in told.hypotheses if h.failure_mode == "model.weight_init_mismatch") \
        if "model.weight_init_mismatch" in rank else None
    assert wi is None or any(r.id == "WIN-012" and not r.supports for r in wi.rules)
    # the text report says what lowered a score
    from precdx.render.text import render_text
    text = render_text(told, max_hypotheses=10)
    block = text[text.index("config.hyperparameter_mismatch"):]
    block = block[:block.index("next steps")]
    assert "argued against by: CHECKLIST-CLEAN checklist-read-no-difference (0.55)" in block


def test_instruction_tuning_is_read_from_settings_and_pretraining_from_the_corpus():
    def sft(*items):
        return dx.read_scopes(list(_facts(*items)))["sft"]

    def value(role, name, v, category="data"):
        return {"type": "config_value", "role": role, "run": role, "name": name, "category": category, "value": v}

    assert sft(value("target", "is_instruction_dataset", "true")).present is True
    assert sft(value("target", "template", "llama3")).present is True
    assert sft(value("target", "template", "default")).present is True  # (LLaMA-Factory's default template)
    assert sft(value("target", "template", "empty")).present is None
    assert sft(value("target", "stage", "sft", "other")).present is True
    assert sft(*(value(r, "stage", "pt", "other") for r in ("baseline", "target"))).present is False
    assert sft(value("target", "is_instruction_dataset", "false")).present is False
    # MindSpeed prints prompt_type None for pretraining: no template in use
    assert sft(value("target", "template", "None")).present is None
    corpus = [value(r, "data_path", f"/data/{r}/wiki_text_document") for r in ("baseline", "target")]
    assert sft(*corpus).present is False
    assert sft(*corpus[:1], value("target", "data_path", "/data/alpaca_packed_input_ids_document")).present is None
    assert sft().present is None
    # the answer settles what the artefacts leave open, and loses where they tell
    answer = {"type": "observation", "name": "instruction_tuning", "value": True, "source": "answer"}
    assert sft(answer).present is True
    contra = sft(value("target", "is_instruction_dataset", "false"), answer)
    assert contra.present is False and contra.answered is True
    # the kb's loss-mask mode carries the scope: a pretraining job drops it from the differential
    kb = load_kb()
    assert kb["data.loss_mask_mismatch"].presentation.scope == "sft"
