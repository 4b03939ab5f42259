"""MLflow file stores: a real store written by the mlflow client (mlflow-skinny), and the
documented layout written by hand for the malformed cases."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from click.testing import CliRunner

from precdx.cli import main
from tests.collectors.tracking.conftest import curve, facts_of, pick

WRITER = textwrap.dedent("""
    import math, os, sys
    import mlflow
    root, drift = sys.argv[1], float(sys.argv[2])
    mlflow.set_tracking_uri("file://" + root)
    mlflow.set_experiment("migration")
    ids = []
    for name, d in (("gpu", 0.0), ("npu", drift)):
        with mlflow.start_run(run_name=name) as run:
            for i in range(10, 410, 10):
                loss = 2.0 + 8.0 * math.exp(-i / 60) + d * i
                # what transformers' MLflowCallback logs: plain names, epoch alongside
                mlflow.log_metrics({"loss": loss, "grad_norm": 1.0 + d * 50, "learning_rate": 1e-4,
                                    "epoch": i / 400}, step=i)
            mlflow.log_metric("eval_loss", 2.5, step=400)
            ids.append(run.info.run_id)
    print(" ".join(ids))
""")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    pytest.importorskip("mlflow", reason="the mlflow client writes the real store")
    root = tmp_path_factory.mktemp("mlflow") / "mlruns"
    env = dict(os.environ, MLFLOW_ALLOW_FILE_STORE="true", PYTHONWARNINGS="ignore")
    res = subprocess.run([sys.executable, "-c", WRITER, str(root), "0.004"], capture_output=True, text=True,
                         env=env, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    gpu, npu = res.stdout.split()[-2:]
    runs = {p.name: p for p in root.glob("*/*") if (p / "metrics").is_dir()}
    return root, runs[gpu], runs[npu]


@pytest.mark.slow  # the mlflow client writes a real store first
def test_real_mlflow_store_runs_are_compared(store):
    _, gpu, npu = store
    assert (npu / "metrics" / "loss").is_file()  # the documented layout, written by mlflow itself
    facts, w = facts_of(target=npu, baseline=gpu)
    s = pick(facts, "loss_series", role="baseline")
    assert (s.framework, s.windowed, s.n_points, s.first_step, s.last_step) == ("hf_trainer", True, 40, 10, 400)
    assert s.first_loss == pytest.approx(curve(10)) and s.eval_points == 1
    cmp = pick(facts, "loss_compare", role="target")
    assert cmp.final_rel_err > 0.3 and cmp.first_divergence_step is not None
    assert pick(facts, "grad_norm_compare", role="target").mean_rel_err == pytest.approx(0.2, abs=1e-6)


@pytest.mark.slow
def test_real_mlflow_store_through_the_cli(store):
    _, gpu, npu = store
    res = CliRunner().invoke(main, ["diagnose", "--target", str(npu), "--baseline", str(gpu), "--format", "json"])
    assert res.exit_code == 0, res.output[-2000:]
    out = json.loads(res.stdout)
    assert out["verdict"] == "misaligned"
    inspect = CliRunner().invoke(main, ["inspect", str(npu)])
    assert "log.tracking [mlflow]" in inspect.stdout and "tracking.meta [mlflow]" in inspect.stdout


@pytest.mark.slow
def test_whole_store_under_one_run_folder_uses_the_richest_run_and_warns(store, tmp_path):
    root, gpu, npu = store
    facts, w = facts_of(target=root)
    assert pick(facts, "loss_series", role="target").n_points == 40
    assert any("2 tracking curves" in x["message"] for x in w)


def _hand_store(tmp_path, lines: dict[str, str]):
    run = tmp_path / "mlruns" / "1" / "abc"
    (run / "metrics").mkdir(parents=True)
    (run / "meta.yaml").write_text("run_id: abc\nexperiment_id: '1'\n")
    for name, text in lines.items():
        f = run / "metrics" / name
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text)
    return run


def test_hand_written_layout_with_slash_names_and_bad_lines(tmp_path):
    run = _hand_store(tmp_path, {
        "train_loss": "".join(f"1700000000{i:03d} {curve(i)} {i}\n" for i in range(1, 21))
        + "garbage line\n" + "1700000000999 nan 21\n",
        "optim/grad_norm": "".join(f"1700000000{i:03d} 1.5 {i}\n" for i in range(1, 22)),
        "lr": "1700000000001 0.001 1\n",
    })
    facts, w = facts_of(target=run)
    s = pick(facts, "loss_series", role="target")
    assert (s.framework, s.n_points, s.nan_count, s.first_nan_step) == ("generic", 21, 1, 21)
    assert s.has_grad_norm is False  # "optim/grad_norm" is no known name ...
    assert any("not an MLflow metric line" in x["message"] and x.get("line") == 21 for x in w)


def test_user_mapping_names_any_scalar(tmp_path):
    run = _hand_store(tmp_path, {
        "train_loss": "".join(f"1700000000{i:03d} {curve(i)} {i}\n" for i in range(1, 21)),
        "optim/grad_norm": "".join(f"1700000000{i:03d} 1.5 {i}\n" for i in range(1, 21)),
    })
    (tmp_path / "mlruns" / "1" / "abc" / "precdx_tags.yaml").write_text(
        "precdx_tracking_tags:\n  loss: train_loss\n  grad_norm: optim/grad_norm\n  framework: mytrainer\n")
    facts, w = facts_of(target=run)
    s = pick(facts, "loss_series", role="target")
    assert (s.framework, s.has_grad_norm) == ("mytrainer", True)  # ... unless the user names it


def test_broken_user_mapping_is_a_warning_with_its_line(tmp_path):
    run = _hand_store(tmp_path, {"train_loss": "1 2.0 1\n2 1.9 2\n"})
    (run / "tags.yaml").write_text("precdx_tracking_tags:\n  loss: train_loss\n  gradnorm: x\n")
    facts, w = facts_of(target=run)
    assert pick(facts, "loss_series", role="target").framework == "generic"
    assert any("unknown key(s) gradnorm" in x["message"] and x["path"].endswith("tags.yaml") for x in w)
