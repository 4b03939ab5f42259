"""TensorBoard event files written by torch.utils.tensorboard.SummaryWriter, read back through
discovery and the logs collector's comparison, then diagnosed."""
from __future__ import annotations

import math
import shutil

import pytest

from precdx.diagnosis import diagnose
from tests.collectors.tracking.conftest import curve, facts_of, megatron_tags, pick, write_tb

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

STEPS = range(1, 301)


def _megatron_case(tmp_path, drift: float, gn_bump: float = 0.0):
    case = tmp_path / "case"
    # Megatron also writes "lm loss vs samples" (x-axis = consumed samples): never the curve.
    write_tb(case / "baseline" / "tensorboard", megatron_tags(seed=1), STEPS,
             extra={"lm loss vs samples": lambda i: 99.0})
    write_tb(case / "target" / "tensorboard", megatron_tags(drift=drift, gn_bump=gn_bump, seed=2), STEPS,
             extra={"lm loss vs samples": lambda i: 99.0})
    return case


def test_megatron_event_files_become_the_runs_curves_and_a_drift_is_diagnosed(tmp_path):
    case = _megatron_case(tmp_path, drift=0.004, gn_bump=0.2)
    facts, w = facts_of(case)
    base = pick(facts, "loss_series", role="baseline")
    tgt = pick(facts, "loss_series", role="target")
    assert base.framework == tgt.framework == "megatron"
    assert base.windowed is False  # TensorBoard holds each iteration's own loss
    assert (base.n_points, base.first_step, base.last_step, base.log_interval) == (300, 1, 300, 1)
    assert base.first_loss == pytest.approx(megatron_tags(seed=1)["lm loss"](1), rel=1e-6)  # float32 on disk
    assert base.has_grad_norm and base.has_loss_scale
    assert "tensorboard" in base.source
    cmp = pick(facts, "loss_compare", role="target")
    assert cmp.steps_compared == 300
    assert cmp.final_rel_err > 0.3 and cmp.first_step_rel_err < 0.01
    gn = pick(facts, "grad_norm_compare", role="target")
    assert gn.mean_rel_err == pytest.approx(0.2, abs=0.02)
    trend = pick(facts, "loss_scale_trend", role="target")
    assert trend.first == trend.last == 65536.0
    assert not [x for x in w if "tracking" in x["message"]]
    diag = diagnose(facts, warnings=w)
    assert diag.verdict == "misaligned"
    assert diag.hypotheses, "a drifting target must produce hypotheses"


def test_matching_event_files_show_no_divergence(tmp_path):
    case = _megatron_case(tmp_path, drift=0.0)
    facts, _ = facts_of(case)
    cmp = pick(facts, "loss_compare", role="target")
    assert cmp.first_divergence_step is None
    assert cmp.max_rel_err < 0.01


@pytest.mark.parametrize("tags, framework, windowed", [
    ({"train/loss": curve, "train/grad_norm": lambda i: 1.0, "train/learning_rate": lambda i: 1e-4,
      "train/epoch": lambda i: i / 300}, "hf_trainer", True),
    ({"loss_metrics/global_avg_loss": curve, "loss_metrics/global_max_loss": lambda i: curve(i) + 1,
      "grad_norm": lambda i: 1.0, "lr": lambda i: 1e-4}, "torchtitan", False),
    ({"reduced_train_loss": curve, "grad_norm": lambda i: 1.0, "lr": lambda i: 1e-4,
      "global_step": lambda i: i}, "nemo", False),
    ({"train_loss": curve, "lr": lambda i: 1e-4}, "generic", False),
])
def test_framework_tag_names_are_mapped(tmp_path, tags, framework, windowed):
    write_tb(tmp_path / "run" / "tb", tags, range(10, 210, 10))
    facts, w = facts_of(target=tmp_path / "run")
    s = pick(facts, "loss_series", role="target")
    assert (s.framework, s.windowed, s.n_points, s.log_interval) == (framework, windowed, 20, 10)
    assert s.first_loss == pytest.approx(curve(10), rel=1e-6)
    assert s.has_grad_norm == (framework != "generic")


def test_nan_loss_in_event_file_is_located(tmp_path):
    tags = megatron_tags()
    tags["lm loss"] = lambda i: math.nan if i == 150 else curve(i)
    write_tb(tmp_path / "run" / "tb", tags, STEPS)
    facts, _ = facts_of(target=tmp_path / "run")
    s = pick(facts, "loss_series", role="target")
    assert s.nan_count == 1 and s.first_nan_step == 150


def test_restart_writes_a_second_event_file_and_last_values_win(tmp_path):
    d = tmp_path / "run" / "tb"
    write_tb(d, {"lm loss": lambda i: 5.0}, range(1, 201))
    first = next(d.iterdir())
    # the resumed job re-logs steps 151..300 into a newer file of the same folder
    stamp = int(first.name.split(".")[3]) + 10
    write_tb(tmp_path / "tmp", {"lm loss": lambda i: 4.0}, range(151, 301))
    second = next((tmp_path / "tmp").iterdir())
    shutil.move(second, d / second.name.replace(second.name.split(".")[3], str(stamp), 1))
    facts, _ = facts_of(target=tmp_path / "run")
    s = pick(facts, "loss_series", role="target")
    assert (s.n_points, s.restarts, s.first_loss, s.last_loss) == (300, 1, 5.0, 4.0)


def test_cut_off_event_file_reads_up_to_the_cut_and_warns(tmp_path):
    d = write_tb(tmp_path / "run" / "tb", megatron_tags(), STEPS)
    f = next(d.iterdir())
    data = f.read_bytes()
    f.write_bytes(data[: len(data) // 2])
    facts, w = facts_of(target=tmp_path / "run")
    s = pick(facts, "loss_series", role="target")
    assert 100 < s.n_points < 200
    assert any("not a complete event record" in x["message"] and x["path"] == str(f) for x in w)


def test_file_named_like_an_event_file_but_not_one_is_a_warning(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "events.out.tfevents.123.host").write_text("hello, this is not a TFRecord\n" * 20)
    facts, w = facts_of(target=run)
    assert not [f for f in facts if f.type == "loss_series"]
    assert any("no TensorBoard event could be read" in x["message"] for x in w)
    assert any("no usable training log" in x["message"] for x in w)


def test_event_file_without_a_loss_tag_says_which_tags_it_has(tmp_path):
    write_tb(tmp_path / "run" / "tb", {"throughput": lambda i: 100.0}, range(1, 11))
    facts, w = facts_of(target=tmp_path / "run")
    assert not [f for f in facts if f.type == "loss_series"]
    assert any("no training-loss scalar" in x["message"] and "throughput" in x["message"] for x in w)


def test_text_log_stays_the_curve_when_both_exist(tmp_path):
    run = tmp_path / "run"
    write_tb(run / "tensorboard", megatron_tags(), STEPS)
    lines = [f" iteration {i:8d}/     300 | lm loss: {curve(i):.6E} | loss scale: 65536.0 | grad norm: 1.000 |"
             for i in range(10, 301, 10)]
    (run / "train.log").write_text("\n".join(lines) + "\n")
    facts, _ = facts_of(target=run)
    s = pick(facts, "loss_series", role="target")
    assert s.source.endswith("train.log") and s.n_points == 30 and s.windowed is True


def test_several_tensorboard_runs_in_one_folder_use_the_richest_and_warn(tmp_path):
    run = tmp_path / "run"
    write_tb(run / "runs" / "Jan01_a", {"train/loss": curve}, range(1, 51))
    write_tb(run / "runs" / "Jan02_b", {"train/loss": curve}, range(1, 121))
    facts, w = facts_of(target=run)
    s = pick(facts, "loss_series", role="target")
    assert s.n_points == 120 and "Jan02_b" in s.source
    msg = next(x["message"] for x in w if "tracking curves" in x["message"])
    assert "Jan01_a" in msg and "50 points" in msg and "--target" in msg


def test_event_file_given_as_the_target_itself(tmp_path):
    d = write_tb(tmp_path / "t" / "tb", megatron_tags(drift=0.004), STEPS)
    b = write_tb(tmp_path / "b" / "tb", megatron_tags(), STEPS)
    facts, _ = facts_of(target=next(d.iterdir()), baseline=next(b.iterdir()))
    assert pick(facts, "loss_compare", role="target").final_rel_err > 0.3
