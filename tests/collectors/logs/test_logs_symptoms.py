"""Each symptom class yields the measurement a rule needs, on real-format logs (the scenario
folders read in place, or logs generated here in a real trainer format)."""
from __future__ import annotations

import math
from pathlib import Path

import pytest


def test_every_scenario_collects_without_warnings(scenarios: Path, kit) -> None:
    cases = sorted(scenarios.glob("case-*"))
    assert cases
    for root in cases:
        facts, warnings = kit.collect(kit.case_from_dir(root))
        assert not list(warnings), (root.name, list(warnings))
        types = {f.type for f in facts}
        assert {"loss_series", "loss_compare", "nan_compare", "spike_compare"} <= types, root.name


def test_first_step_difference(scenarios: Path, kit) -> None:
    facts, _ = kit.collect(kit.case_from_dir(scenarios / "case-01"))
    lc = kit.one(facts, "loss_compare", run="target")
    assert lc.first_step == 1 and lc.first_step_rel_err > 0.005 and lc.first_rel_err_over_1pct_step == 1
    assert lc.mean_rel_err < 0.01  # small overall: only the start differs noticeably


def test_long_run_drift_with_grad_norm_first(scenarios: Path, kit) -> None:
    facts, _ = kit.collect(kit.case_from_dir(scenarios / "case-02"))
    lc = kit.one(facts, "loss_compare", run="target")
    assert lc.first_step_rel_err < 0.005
    assert lc.mean_rel_err_late > 0.01 > lc.mean_rel_err_early
    assert lc.drift_slope > 0 and lc.first_divergence_step > 100
    gn = kit.one(facts, "grad_norm_compare", run="target")
    assert gn.departs_before_loss is True and gn.lead_steps > 0 and gn.late_growth_ratio > 2


def test_grad_norm_ratio_tells_a_loss_logged_differently_from_a_training_difference(scenarios: Path, kit) -> None:
    """case-20: the loss is halved but the grad norms agree (only the logged loss differs);
    case-08: a near-constant loss ratio above 1 while the grad norm is lower (the training differs)."""
    facts, _ = kit.collect(kit.case_from_dir(scenarios / "case-20"))
    lc, gn = kit.one(facts, "loss_compare", run="target"), kit.one(facts, "grad_norm_compare", run="target")
    assert lc.ratio_mean == pytest.approx(0.5, abs=0.01) and gn.ratio_mean == pytest.approx(1.0, abs=0.01)
    assert gn.ratio_cv < 0.01
    facts, _ = kit.collect(kit.case_from_dir(scenarios / "case-08"))
    lc, gn = kit.one(facts, "loss_compare", run="target"), kit.one(facts, "grad_norm_compare", run="target")
    assert lc.ratio_mean > 1.05 and gn.ratio_mean < 0.9 * lc.ratio_mean


def test_aligned_within_noise_band(scenarios: Path, kit) -> None:
    facts, _ = kit.collect(kit.case_from_dir(scenarios / "case-03"))
    lc = kit.one(facts, "loss_compare", run="target")
    assert lc.noise_band is not None and lc.within_noise_band is True and lc.first_divergence_step is None
    assert kit.one(facts, "rerun_compare", role="baseline").identical is False


def test_nan_then_crash(scenarios: Path, kit) -> None:
    facts, _ = kit.collect(kit.case_from_dir(scenarios / "case-12"))
    nc = kit.one(facts, "nan_compare", run="target")
    assert nc.target_nan_count > 0 and nc.baseline_nan_count == 0 and nc.target_first_nan_step == 46
    assert nc.target_max_nan_50 == nc.target_nan_count
    assert kit.one(facts, "loss_compare", run="target").stopped_early is True


def test_overflow_and_loss_scale_collapse(scenarios: Path, kit) -> None:
    facts, _ = kit.collect(kit.case_from_dir(scenarios / "case-18"))
    ls = kit.one(facts, "loss_scale_trend", run="target")
    assert ls.trend == "falling" and ls.collapsed is True and ls.last == 1.0
    assert kit.one(facts, "loss_scale_trend", run="baseline").collapsed is False
    nc = kit.one(facts, "nan_compare", run="target")
    assert nc.target_max_skipped_50 == 50 and nc.baseline_max_skipped_50 == 0


def test_spike_and_rerun_machine_events(scenarios: Path, kit) -> None:
    facts, _ = kit.collect(kit.case_from_dir(scenarios / "case-14"))
    ev = kit.one(facts, "log_event", run="target", kind="rerun_not_reproducible")
    assert ev.step == 131
    assert kit.one(facts, "log_event", run="target", kind="rerun_transient_error").node == "node-10-0-3-149"
    assert kit.one(facts, "log_event", run="target", kind="spike_detected").step == 131
    series = kit.one(facts, "loss_series", run="target")
    assert series.restarts == 0 and series.last_step == 160  # the resumed run continues at 131


def test_spike_rate_against_baseline(tmp_path: Path, kit) -> None:
    def titan(spikes: set[int]) -> list[str]:
        out = []
        for step in range(1, 301):
            loss = 3.0 - step / 1000 + (0.01 if step % 2 else -0.01) + (2.0 if step in spikes else 0.0)
            out.append(f"[rank0]:[titan] 2025-11-25 19:45:01,441 - root - INFO - \x1b[31mstep: {step:2}  "
                       f"\x1b[32mloss: {loss:8.5f}  \x1b[33mgrad_norm: {1.0:7.4f}  \x1b[34mmemory:  1.21GiB(0.86%)"
                       f"  tps: 5,756  tflops: 0.41  mfu: 0.04%\x1b[39m")
        return out
    case = kit.two_runs(tmp_path, titan({150}), titan({40, 90, 150, 210, 260}))
    facts, warnings = kit.collect(case)
    sc = kit.one(facts, "spike_compare", run="target")
    assert (sc.target_spikes, sc.baseline_spikes) == (5, 1)
    assert sc.rate_ratio == pytest.approx(5.0) and sc.target_recovered == 5 and sc.target_first_spike_step == 40
    assert kit.one(facts, "loss_series", run="target").framework == "torchtitan"


def test_irreproducible_target(scenarios: Path, kit) -> None:
    facts, _ = kit.collect(kit.case_from_dir(scenarios / "case-11"))
    rc = kit.one(facts, "rerun_compare", role="target")
    assert rc.identical is False and rc.first_step_identical is False and rc.mean_rel_diff > 0.01
    assert kit.one(facts, "loss_compare", run="target_rerun").role == "target_rerun"


def test_loss_definition_difference_is_a_constant_ratio(scenarios: Path, kit) -> None:
    facts, _ = kit.collect(kit.case_from_dir(scenarios / "case-20"))
    lc = kit.one(facts, "loss_compare", run="target")
    assert abs(lc.ratio_mean - 1) > 0.1 and lc.ratio_cv < 0.01
    assert kit.one(facts, "loss_series", run="baseline").framework == "hf_trainer_state"


def test_outlier_group(scenarios: Path, kit) -> None:
    facts, _ = kit.collect(kit.case_from_dir(scenarios / "case-19"))
    outliers = [f for f in facts if f.type == "group_outlier" and f.is_outlier]
    assert [f.group for f in outliers] == ["group03"]
    summary = kit.one(facts, "group_summary", role="target")
    assert summary.n_groups == 8 and summary.outlier_hosts == "node-10-3-4-157"


def test_intervals_differ_windows_are_reaveraged(tmp_path: Path, kit) -> None:
    """Baseline logs every step, target every 10 steps (Megatron averages its window): the target
    point at step 10 is compared with the mean of baseline steps 1..10, not with step 10 alone."""
    def meg(step: int, loss: float) -> str:
        return (f" iteration {step:8d}/     100 | consumed samples: {step * 8:12d} | learning rate: 1.000000E-04 | "
                f"global batch size:     8 | lm loss: {loss:.6E} | loss scale: 1.0 | grad norm: 1.000 | "
                f"number of skipped iterations:   0 | number of nan iterations:   0 |")
    per_step = {s: 3.0 + (0.5 if s % 10 == 0 else 0.0) for s in range(1, 101)}
    base = [meg(s, v) for s, v in per_step.items()]
    target = [meg(s, sum(per_step[i] for i in range(s - 9, s + 1)) / 10) for s in range(10, 101, 10)]
    facts, _ = kit.collect(kit.two_runs(tmp_path, base, target))
    lc = kit.one(facts, "loss_compare", run="target")
    assert lc.steps_compared == 10 and lc.mean_rel_err == pytest.approx(0.0, abs=1e-6)
    assert math.isclose(kit.one(facts, "loss_series", run="target").log_interval, 10)
