"""W&B run folders (wandb-history.jsonl, UI CSV exports, binary .wandb files written by the SDK in
offline mode) and plain CSV / JSON lines of step and metrics."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from precdx.collectors.tracking.sniff import sniff
from tests.collectors.tracking.conftest import curve, facts_of, pick


def _history(path, drift=0.0, n=40, every=10, nan_at=None):
    """wandb-history.jsonl as the SDK wrote it: one object per log call, `_step` counting calls,
    the trainer's step in `train/global_step` (HF's WandbCallback)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = []
    for k in range(n):
        step = (k + 1) * every
        loss = float("nan") if step == nan_at else curve(step, drift)
        rows.append({"train/loss": loss, "train/grad_norm": 1.0, "train/learning_rate": 1e-4,
                     "train/epoch": step / 1000, "train/global_step": step, "_step": k, "_runtime": k * 2.5,
                     "_timestamp": 1.7e9 + k})
        if k % 10 == 9:
            rows.append({"eval/loss": 3.0, "train/global_step": step, "_step": k, "_runtime": k * 2.5})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))  # json writes NaN as NaN, as W&B does


def test_wandb_history_pair_is_compared_on_the_trainer_step(tmp_path):
    _history(tmp_path / "b" / "wandb" / "run-1" / "files" / "wandb-history.jsonl")
    _history(tmp_path / "t" / "wandb" / "run-2" / "files" / "wandb-history.jsonl", drift=0.004, nan_at=300)
    facts, w = facts_of(target=tmp_path / "t", baseline=tmp_path / "b")
    base = pick(facts, "loss_series", role="baseline")
    assert (base.framework, base.windowed, base.first_step, base.last_step, base.log_interval) == \
        ("hf_trainer", True, 10, 400, 10)  # train/global_step, not W&B's own _step counter
    assert base.eval_points == 4
    tgt = pick(facts, "loss_series", role="target")
    assert (tgt.nan_count, tgt.first_nan_step) == (1, 300)
    assert pick(facts, "loss_compare", role="target").final_rel_err > 0.3


def test_wandb_csv_export_with_two_runs(tmp_path):
    header = ["Step", "gpu-run - train/loss", "gpu-run - train/loss__MIN", "gpu-run - train/loss__MAX",
              "npu-run - train/loss", "npu-run - train/loss__MIN", "npu-run - train/loss__MAX"]
    lines = [",".join(f'"{h}"' for h in header)]
    for s in range(10, 210, 10):
        g, n = curve(s), curve(s, 0.01)
        lines.append(f"{s},{g},{g},{g},{n if s != 100 else ''},{n},{n}")
    export = tmp_path / "run" / "export.csv"
    export.parent.mkdir()
    export.write_text("\n".join(lines) + "\n")
    assert sniff(export, export.read_bytes()).detail == "wandb-csv"
    facts, w = facts_of(target=export)
    s = pick(facts, "loss_series", role="target")
    assert (s.n_points, s.first_loss) == (20, pytest.approx(curve(10)))
    assert any("holds 2 W&B runs" in x["message"] and "gpu-run" in x["message"] for x in w)
    # A user mapping naming the other run's column picks that run.
    (tmp_path / "run" / "tags.yaml").write_text("precdx_tracking_tags:\n  loss: 'npu-run - train/loss'\n")
    facts, w = facts_of(target=tmp_path / "run")
    s = pick(facts, "loss_series", role="target")
    assert (s.n_points, s.first_loss) == (19, pytest.approx(curve(10, 0.01)))  # the empty cell is no point


def test_plain_csv_and_jsonl_with_step_and_metrics(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.csv").write_text("iteration,loss,grad_norm,lr\n" + "".join(
        f"{i},{curve(i)},{'inf' if i == 50 else 1.0},1e-4\n" for i in range(1, 101)))
    facts, w = facts_of(target=run)
    s = pick(facts, "loss_series", role="target")
    assert (s.framework, s.n_points, s.has_grad_norm, s.nan_count) == ("generic", 100, True, 1)
    run2 = tmp_path / "run2"
    run2.mkdir()
    lines = [json.dumps({"step": i, "loss": curve(i), "lr": 1e-4}) for i in range(1, 101)]
    lines.insert(10, "{not json")
    (run2 / "log.jsonl").write_text("\n".join(lines) + "\n")
    facts, w = facts_of(target=run2, baseline=run)
    assert pick(facts, "loss_series", role="target").n_points == 100
    assert pick(facts, "loss_compare", role="target").max_rel_err < 1e-9
    assert any("not a JSON object" in x["message"] and x.get("line") == 11 for x in w)


def test_tables_that_are_not_curves_are_not_claimed(tmp_path):
    cases = {
        "a.csv": "name,value\nx,1\n",                             # no step column
        "b.csv": "step,throughput\n1,100\n",                      # no loss column
        "c.csv": "vpp_stage,name,step,loss\n0,x,1,2\n",           # msprobe monitor table
        "d.jsonl": '{"event": "start"}\n',
        "e.json": '{\n  "step": 1,\n  "loss": 2.0\n}\n',           # one JSON document, not JSON lines
    }
    for name, text in cases.items():
        p = tmp_path / name
        p.write_text(text)
        assert sniff(p, p.read_bytes()) is None, name


WANDB_WRITER = textwrap.dedent("""
    import math, sys
    import wandb
    root, drift = sys.argv[1], float(sys.argv[2])
    run = wandb.init(project="precdx-test", dir=root, mode="offline")
    for i in range(1, 61):
        step = i * 10
        run.log({"lm loss": 2.0 + 8.0 * math.exp(-step / 60) + drift * step, "grad-norm": 1.0,
                 "learning-rate": 1e-4, "loss-scale": 4096.0}, step=step)
    run.finish()
""")


@pytest.mark.slow
def test_binary_wandb_run_files_written_by_the_sdk(tmp_path):
    pytest.importorskip("wandb", reason="binary .wandb files need the wandb SDK (extra 'wandb')")
    env = dict(os.environ, WANDB_MODE="offline", WANDB_SILENT="true", WANDB_DISABLE_GIT="true",
               WANDB_CONSOLE="off", WANDB_DIR=str(tmp_path))
    for role, drift in (("b", 0.0), ("t", 0.004)):
        (tmp_path / role).mkdir()
        res = subprocess.run([sys.executable, "-c", WANDB_WRITER, str(tmp_path / role), str(drift)],
                             capture_output=True, text=True, env=env, timeout=300)
        assert res.returncode == 0, res.stderr[-2000:]
    files = sorted(tmp_path.glob("*/wandb/offline-run-*/run-*.wandb"))
    assert len(files) == 2
    facts, w = facts_of(target=tmp_path / "t", baseline=tmp_path / "b")
    s = pick(facts, "loss_series", role="baseline")
    # Megatron's W&B writer uses its TensorBoard names; W&B's step is the iteration here
    assert (s.framework, s.n_points, s.first_step, s.last_step) == ("megatron", 60, 10, 600)
    assert s.has_loss_scale and s.source.endswith(".wandb")
    assert pick(facts, "loss_compare", role="target").final_rel_err > 0.3
    # a cut-off file reads up to the cut and says so
    data = files[1].read_bytes()
    files[1].write_bytes(data[: len(data) * 2 // 3])
    facts, w = facts_of(target=tmp_path / "t")
    assert 0 < pick(facts, "loss_series", role="target").n_points < 60
    assert any(files[1].name in x.get("path", "") and ("cut off" in x["message"] or "damaged" in x["message"])
               for x in w)


def test_compressed_csv_export_is_read(tmp_path):
    import gzip

    run = tmp_path / "run"
    run.mkdir()
    text = "global_step,train_loss\n" + "".join(f"{i},{curve(i)}\n" for i in range(1, 51))
    (run / "metrics.csv.gz").write_bytes(gzip.compress(text.encode()))
    facts, w = facts_of(target=run)
    s = pick(facts, "loss_series", role="target")
    assert (s.n_points, s.first_loss) == (50, pytest.approx(curve(1)))
