"""precdx replay from the command line (and its errors), the Megatron/MindSpeed hook on plain
scalars, and the plain-PyTorch context's output folder rules."""
from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")

import torch  # noqa: E402
from click.testing import CliRunner  # noqa: E402

from precdx.cli import main  # noqa: E402
from precdx.demo.watching import run_watch_case  # noqa: E402
from precdx.errors import PrecdxError  # noqa: E402
from precdx.watch import megatron_hook, watch  # noqa: E402

FNS = ["--model-fn", "precdx.demo.watching:baseline_model", "--step-fn", "precdx.demo.watching:demo_step",
       "--batch-fn", "precdx.demo.watching:baseline_batch"]


@pytest.fixture(scope="module")
def hyper_case(tmp_path_factory):
    torch.set_num_threads(1)
    return run_watch_case("hyperparameter", tmp_path_factory.mktemp("w") / "demo", steps=8, replay_steps=False,
                          quiet=True)


@pytest.mark.slow  # needs the watched demo training run (hyper_case)
def test_replay_command_writes_the_reference_side(hyper_case):
    status = json.loads((hyper_case / "watch.json").read_text())
    it = status["captured"][0]["iteration"]
    assert not (hyper_case / "baseline" / "msprobe_dump").exists()
    res = CliRunner().invoke(main, ["replay", str(hyper_case), "--step", str(it), *FNS])
    assert res.exit_code == 0, res.output
    assert (hyper_case / "baseline" / "msprobe_dump" / f"step{it - 1}" / "rank0" / "dump.json").is_file()
    assert json.loads((hyper_case / "watch.json").read_text())["replays"][0]["iteration"] == it


@pytest.mark.slow  # needs the watched demo training run (hyper_case)
def test_replay_errors_are_one_line(hyper_case, tmp_path):
    runner = CliRunner()
    res = runner.invoke(main, ["replay", str(hyper_case), "--step", "99", *FNS])
    assert res.exit_code == 2 and "was not captured" in res.output
    res = runner.invoke(main, ["replay", str(hyper_case), "--model-fn", "no_such_module_xyz:f"])
    assert res.exit_code == 2 and "cannot import" in res.output
    res = runner.invoke(main, ["replay", str(tmp_path), *FNS])
    assert res.exit_code == 2 and "watch.json" in res.output


@pytest.mark.slow  # needs the watched demo training run (hyper_case)
def test_megatron_hook_on_scalars(hyper_case, tmp_path):
    baseline = hyper_case.parent / "gpu_run"
    hook = megatron_hook(baseline=baseline, out=tmp_path / "meg", on_breach="stop", capture_steps=0, quiet=True)
    assert hook(1, 4.1616, 0.81, 1.0) is False      # within tolerance of the baseline's first step
    assert hook(2, float("nan"), 0.9, 1.0) is True  # non-finite: breach, and stop was asked for
    hook.close()
    status = json.loads((tmp_path / "meg" / "watch.json").read_text())
    assert status["breach"]["check"] == "nonfinite" and status["breach"]["step"] == 2
    assert (tmp_path / "meg" / "baseline" / "train.log").is_file()


def test_watch_refuses_a_foreign_output_folder(tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    with pytest.raises(PrecdxError):
        watch(out=tmp_path / "mine")
    with watch(out=tmp_path / "w", quiet=True) as w:   # no model, no baseline: sanity checks only
        w.step(2.0, grad_norm=1.0)
        w.step(float("inf"), grad_norm=1.0)
    assert w.breach.check == "nonfinite" and w.breach.step == 2
