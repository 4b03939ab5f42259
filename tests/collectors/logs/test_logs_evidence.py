"""Logs as full evidence: per-iteration settings compared across runs (lr_compare), one run held
against what a healthy run looks like (run_health), generic `key: value` trainer lines, declared
formats without a step, HF records dated from the progress counter, single-run diagnosis."""
from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from precdx.collectors.base import Case, RunDir
from precdx.collectors.logs.model import Record
from precdx.collectors.logs.reader import ReadStats, iter_log, parse_lines
from precdx.collectors.logs.series import SeriesBuilder

REAL = "real-logs"


def _series(path: Path, role: str = "target"):
    b = SeriesBuilder(role, role)
    for item in iter_log(path, ReadStats(str(path))):
        b.add(item)
    b.sources.append(str(path))
    return b.build()


def _health(kit, path: Path):
    """run_health of one log file read in place (only that file, not its neighbours)."""
    from precdx.collectors.logs import COLLECTOR
    art = COLLECTOR.sniff(path, path.read_bytes()[:65536])
    facts, _ = kit.collect(Case(runs=[RunDir(role="target", name="target", root=path.parent, artefacts=[art])]))
    return kit.one(facts, "run_health", run="target"), facts


# ------------------------------------------------------------------ lr_compare
def test_lr_compare_from_iteration_lines(scenarios, kit):
    facts, _ = kit.collect(kit.case_from_dir(scenarios / "case-04"))
    lr = kit.one(facts, "lr_compare", run="target")
    assert lr.schedule_differs and lr.first_diff_step == 1
    assert lr.target_peak_lr == pytest.approx(0.003) and lr.baseline_peak_lr == pytest.approx(0.0003)
    assert lr.target_peak_step == lr.baseline_peak_step == 10
    assert (lr.target_global_batch, lr.baseline_global_batch, lr.global_batch_differs) == (8, 8, False)


def test_lr_compare_absent_when_nothing_is_printed(tmp_path, kit):
    lines = [f"step: {s}  loss: {3 - s / 100:.4f}  grad_norm:  1.0000  memory:  1.00GiB(1.00%)  tps: 1,000"
             for s in range(1, 21)]
    facts, _ = kit.collect(kit.two_runs(tmp_path, lines, lines))
    assert not [f for f in facts if f.type == "lr_compare"]


def test_global_batch_and_tokens_per_sample(tmp_path, kit):
    def line(step: int, gbs: int) -> str:
        return (f" iteration {step:8d}/     100 | consumed samples: {step * gbs:12d} | consumed tokens: "
                f"{step * gbs * 2048:12d} | learning rate: 1.000000E-04 | global batch size: {gbs:5d} | "
                f"lm loss: {3 - step / 100:.6E} | loss scale: 1.0 | grad norm: 1.000 | "
                f"number of skipped iterations:   0 | number of nan iterations:   0 |")
    facts, _ = kit.collect(kit.two_runs(tmp_path, [line(s, 8) for s in range(1, 21)],
                                        [line(s, 16) for s in range(1, 21)]))
    lr = kit.one(facts, "lr_compare", run="target")
    assert (lr.target_global_batch, lr.baseline_global_batch, lr.global_batch_differs) == (16, 8, True)
    assert lr.target_tokens_per_sample == pytest.approx(2048) and not lr.schedule_differs


# ------------------------------------------------------------------ run_health
def test_health_of_a_scenario_run_crashing_on_nan(scenarios, kit):
    h, facts = _health(kit, scenarios / "case-12" / "target" / "train.log")
    assert (h.vocab_size, h.loads_checkpoint) == (251, True)
    assert h.first_loss_ratio == pytest.approx(h.first_loss / math.log(251))
    assert (h.first_nonfinite_grad_step, h.first_nan_step, h.nan_dump_step) == (46, 46, 45)
    assert h.loss_finite_at_first_bad_grad is False
    assert (h.planned_steps, h.last_step, h.stopped_early) == (150, 54, True)


def test_health_hf_grad_norm_nan_on_every_record(shared_dir, kit):
    """pink-6: 'grad_norm': nan on every record and the loss printed as 0.0 (the NaN filter)."""
    h, _ = _health(kit, shared_dir / REAL / "hf-transformers" / "pink-6-loss-zero-gradnorm-nan.log")
    assert h.grad_norm_points == h.grad_norm_nonfinite == 13
    assert h.loss_zero_points == 13 and h.first_nan_step == h.first_step


def test_health_grad_norm_explosion(shared_dir, kit):
    """tr11-176b spike: grad norm ~0.2 then 960 (11 records, several in the spike)."""
    h, _ = _health(kit, shared_dir / REAL / "megatron-deepspeed" / "tr11-176b-lm-loss-spike.log")
    assert h.max_grad_norm == pytest.approx(960.351) and h.grad_norm_points == 11
    assert h.max_grad_norm > 50 * h.median_grad_norm and h.grad_norm_nonfinite == 0


def test_health_of_a_fresh_model_and_a_stuck_loss(tmp_path, kit):
    lines = [" > padded vocab (size: 50257) with 47 dummy tokens (new size: 50304)"]
    lines += [f" iteration {s:8d}/      40 | learning rate: 1.0E-04 | global batch size:     8 | lm loss: "
              f"{10.83 + (0.001 if s % 2 else -0.001):.6E} | loss scale: 1.0 | grad norm: 1.4e9 | "
              "number of skipped iterations:   0 | number of nan iterations:   0 |" for s in range(1, 41)]
    (tmp_path / "train.log").write_text("\n".join(lines) + "\n")
    h, _ = _health(kit, tmp_path / "train.log")
    assert h.vocab_size == 50257 and h.first_loss_ratio == pytest.approx(10.831 / math.log(50257), rel=1e-3)
    assert h.late_loss_ratio == pytest.approx(1.0, abs=0.01) and abs(h.loss_rel_drop) < 0.001
    assert h.first_grad_norm == pytest.approx(1.4e9) and h.stopped_early is False


# ------------------------------------------------------------------ formats from real reports
@pytest.mark.parametrize("line, step, loss, lr, gn", [
    ("loss: 2.31 | lr: 1e-4 | grad_norm: 0.9 | epoch: 0.1", None, 2.31, 1e-4, 0.9),
    ("[train] step=12, loss=2.31, lr=1e-4, gnorm=0.5", 12, 2.31, 1e-4, 0.5),
    ("epoch 1 | global_step: 300 | train_loss: 1.75 | learning_rate: 2e-05", 300, 1.75, 2e-5, None),
])
def test_generic_key_value_lines(line, step, loss, lr, gn):
    recs = [r for r in parse_lines([line]) if isinstance(r, Record)]
    assert len(recs) == 1 and recs[0].framework == "keyvalue"
    r = recs[0]
    assert (r.step, r.loss, r.lr, r.grad_norm) == (step, loss, lr, gn)


@pytest.mark.parametrize("line", [
    "The loss: 2.3 was too high, so we lowered the lr: 0.1",      # prose: fewer than three pairs
    "Epoch 1 | loss: 2.31 | acc: 0.5",                            # two pairs only
    "warning: loss scale 1024 | reducing",                        # no numeric pairs
])
def test_generic_reader_leaves_prose_alone(line):
    assert not [r for r in parse_lines([line]) if isinstance(r, Record)]


def test_generic_reader_never_steals_a_wrapped_megatron_line(shared_dir):
    path = shared_dir / REAL / "megatron-deepspeed" / "tr11-176b-wrapped-lines.log"
    recs = [r for r in iter_log(path, ReadStats(str(path))) if isinstance(r, Record)]
    assert {r.framework for r in recs} == {"megatron"}


def test_keyvalue_run_curve(tmp_path, kit):
    lines = [f"loss: {3 - s / 50:.3f} | lr: 1e-4 | grad_norm: 0.9 | epoch: {s / 100:.2f}" for s in range(1, 31)]
    facts, _ = kit.collect(kit.two_runs(tmp_path, lines, lines))
    series = kit.one(facts, "loss_series", run="target")
    assert series.framework == "keyvalue" and series.n_points == 30 and series.step_inferred


def test_declared_format_without_step(tmp_path, kit):
    (tmp_path / "formats.yaml").write_text("precdx_log_formats:\n  - name: loop\n    regex: 'loss=(?P<loss>\\S+)'\n")
    lines = [f"12:00 loss={2 - s / 100:.4f}" for s in range(1, 21)]
    facts, w = kit.collect(kit.two_runs(tmp_path, lines, lines))
    s = kit.one(facts, "loss_series", run="target")
    assert (s.framework, s.n_points, s.first_step, s.last_step, s.step_inferred) == ("loop", 20, 1, 20, True)


def test_hf_records_before_the_first_counter_get_the_right_step(shared_dir):
    """vg-llm-21: a dict with no progress frame before it, then frames up to 20 and the next dict."""
    s = _series(shared_dir / REAL / "hf-transformers" / "vg-llm-21-tqdm-gradnorm-nan.log")
    assert s.steps.tolist() == [10, 20]
    assert s.tracked["total_steps"][3] == 1233


def test_hf_records_without_any_counter_keep_line_order(shared_dir):
    s = _series(shared_dir / REAL / "hf-transformers" / "pink-6-loss-zero-gradnorm-nan.log")
    assert s.steps.tolist() == list(range(1, 14)) and s.step_inferred


# ------------------------------------------------------------------ single-run diagnosis
def test_diagnose_a_single_run_folder(scenarios, repo_dir):
    out = subprocess.run([sys.executable, str(repo_dir / "cli.py"), "diagnose",
                          str(scenarios / "case-17" / "target"), "--format", "json"],
                         capture_output=True, text=True, cwd=repo_dir, timeout=300)
    assert out.returncode == 0, out.stderr
    diag = json.loads(out.stdout)
    roles = {f["role"] for f in diag["facts"] if f["type"] == "run"}
    assert roles == {"target"}
    assert [h["failure_mode"] for h in diag["hypotheses"]][:1] == ["nan.operator_origin"]
    steps = [s for h in diag["hypotheses"] for s in h["next_steps"] if s.get("command")]
    assert any("msprobe_config.json" in s["command"] and "?" not in s["command"] for s in steps)


def test_skipped_iterations_do_not_count_as_an_lr_schedule_difference(tmp_path, kit):
    """A skipped iteration does not advance Megatron's scheduler: the target's printed lr lags
    the baseline's from the skip on, with the same schedule."""
    def line(step: int, lr: float, skipped: int) -> str:
        return (f" iteration {step:8d}/      30 | learning rate: {lr:.6E} | global batch size:     8 | "
                f"lm loss: {3 - step / 100:.6E} | loss scale: 1024.0 | grad norm: 1.000 | "
                f"number of skipped iterations: {skipped:3d} | number of nan iterations:   0 |")
    base = [line(s, 1e-3 * min(s, 10) / 10, 0) for s in range(1, 31)]
    target = [line(s, 1e-3 * min(s if s < 15 else s - 1, 10) / 10 if s < 15 else 1e-3 * (s - 1) / 30, 1 if s == 15 else 0)
              for s in range(1, 31)]
    facts, _ = kit.collect(kit.two_runs(tmp_path, base, target))
    lr = kit.one(facts, "lr_compare", run="target")
    assert lr.steps_compared == 14 and not lr.schedule_differs
