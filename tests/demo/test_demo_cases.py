"""Every demo fault writes a complete, scenario-layout case folder (few steps)."""
from __future__ import annotations

import json
import re

import pytest
import yaml

pytest.importorskip("torch")

from precdx.demo import DEFAULT_FAULT, FAULTS, run_demo  # noqa: E402
from precdx.errors import PrecdxError  # noqa: E402

pytestmark = pytest.mark.slow  # trains, dumps or fuzzes: outside the fast lane (pytest -m 'not slow')

ITERATION = re.compile(r"^ \[[\d\- :.]+\] iteration\s+(\d+)/\s*(\d+) \|")
STEPS = 12


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    root = tmp_path_factory.mktemp("demo")
    return {name: run_demo(name, root / name, steps=STEPS, seed=7) for name in FAULTS}


def test_catalogue_has_the_required_faults():
    assert {"hyperparameter", "data_preprocessing", "wiring", "operator_defect", "nan_op",
            "nondeterministic_op", "loss_scale_collapse"} <= set(FAULTS)
    assert len(FAULTS) >= 15 and len({f.failure_mode for f in FAULTS.values()}) == len(FAULTS)
    assert DEFAULT_FAULT in FAULTS


@pytest.mark.parametrize("name", sorted(FAULTS))
def test_case_folder_complete(cases, name, shared_dir):
    fault = FAULTS[name]
    case = cases[name]
    expected = yaml.safe_load((case / "expected.yaml").read_text())
    modes = {line.split("id:")[1].split(",")[0].strip()
             for line in (shared_dir / "failure-modes.yaml").read_text().splitlines() if "{id:" in line}
    assert expected["failure_modes"] == [fault.failure_mode] and fault.failure_mode in modes
    assert expected["verdict"] == "misaligned"
    assert expected["runs"] == {r: r for r in fault.runs}
    for role in fault.runs:
        run = case / role
        for f in ("train.log", "pretrain_gpt.sh", "env.txt", "pip_freeze.txt"):
            assert (run / f).is_file(), (role, f)
        env = (run / "env.txt").read_text()
        pip = (run / "pip_freeze.txt").read_text()
        if role == "baseline":
            assert "CUDA_VISIBLE_DEVICES=" in env and "torch==2.4.0+cu124" in pip
        else:
            assert "ASCEND_RT_VISIBLE_DEVICES=" in env and "torch-npu==" in pip
        iterations = [m for m in map(ITERATION.match, (run / "train.log").read_text().splitlines()) if m]
        assert iterations and all(int(m.group(2)) == STEPS for m in iterations)
        script = (run / "pretrain_gpt.sh").read_text()
        assert 'GPT_ARGS="' in script and f"--train-iters {STEPS}" in script
        dumps = sorted(run.glob("msprobe_dump/step*/rank0/dump.json"))
        if role in fault.dump_runs and fault.dump_mode:
            config = json.loads((run / "msprobe_config.json").read_text())
            assert len(dumps) == len(config["step"]) >= 1
            for d in dumps:
                for f in ("stack.json", "construct.json"):
                    assert (d.parent / f).is_file()
            assert config["statistics"]["summary_mode"] == fault.dump_mode
            assert sorted(f"step{s}" for s in config["step"]) == [d.parent.parent.name for d in dumps]
        else:
            assert not dumps


def _data(case, role):
    return json.loads(next((case / role).glob("msprobe_dump/step*/rank0/dump.json")).read_text())["data"]


def test_operator_defect_introduces_error_at_gelu(cases):
    base, target = _data(cases["operator_defect"], "baseline"), _data(cases["operator_defect"], "target")
    assert list(base) == list(target)

    def rel(name, slot="output"):
        a, b = base[name][slot][0], target[name][slot][0]
        return abs(a["Norm"] - b["Norm"]) / abs(a["Norm"])
    assert rel("Functional.gelu.0.forward", "input_args") < 1e-5   # inputs match ...
    assert rel("Functional.gelu.0.forward") > 1e-4                 # ... output does not
    # cross-device noise: close but not bit-identical before the defect
    assert base["Functional.linear.0.forward"] != target["Functional.linear.0.forward"]
    assert rel("Functional.linear.0.forward") < 1e-5


def test_nondeterministic_op_differs_first_at_matmul(cases):
    a, b = _data(cases["nondeterministic_op"], "target"), _data(cases["nondeterministic_op"], "target_rerun")
    first = next(k for k in a if a[k] != b[k])
    assert first == "Torch.matmul.0.forward"
    assert a[first]["input_args"] == b[first]["input_args"]


def test_nan_op_dump_shows_softmax_origin_and_log_stops(cases):
    case = cases["nan_op"]
    target = _data(case, "target")
    first_nan = next(k for k, v in target.items() if "NaN" in json.dumps(v.get("output")))
    assert first_nan == "Functional.softmax.0.forward"
    log = (case / "target" / "train.log").read_text()
    assert "found NaN in local grad norm" in log
    assert "found NaN" not in (case / "baseline" / "train.log").read_text()


def test_loss_scale_collapse_logs_skips(cases):
    log = (cases["loss_scale_collapse"] / "target" / "train.log").read_text()
    scales = [float(s) for s in re.findall(r"loss scale: ([\d.]+)", log)]
    assert scales[0] == 65536.0 and scales[-1] < scales[0]
    assert "number of skipped iterations:   1" in log
    base = (cases["loss_scale_collapse"] / "baseline" / "train.log").read_text()
    assert "number of skipped iterations:   1" not in base


def test_hyperparameter_shows_in_script(cases):
    case = cases["hyperparameter"]
    assert "--lr 0.005 " in (case / "baseline/pretrain_gpt.sh").read_text()
    assert "--lr 0.01 " in (case / "target/pretrain_gpt.sh").read_text()


def test_data_and_wiring_visible_in_dumps(cases):
    base, target = _data(cases["data_preprocessing"], "baseline"), _data(cases["data_preprocessing"], "target")
    ids_b = base["Functional.embedding.0.forward"]["input_args"][0]
    ids_t = target["Functional.embedding.0.forward"]["input_args"][0]
    assert (ids_b["Min"], ids_b["Max"]) != (ids_t["Min"], ids_t["Max"])
    base, target = _data(cases["wiring"], "baseline"), _data(cases["wiring"], "target")
    assert list(base) != list(target)


def test_optimizer_fault_matches_at_step0_and_not_after_the_update(cases):
    case = cases["optimizer_update"]
    steps = sorted(p.name for p in (case / "target" / "msprobe_dump").iterdir())
    assert steps == ["step0", "step1"]

    def data(role, step):
        return json.loads((case / role / "msprobe_dump" / step / "rank0" / "dump.json").read_text())["data"]

    def weight(d):
        return d["Functional.embedding.0.forward"]["input_args"][1]
    assert weight(data("baseline", "step0")) == weight(data("target", "step0"))
    assert weight(data("baseline", "step1"))["Norm"] != weight(data("target", "step1"))["Norm"]


def test_nan_faults_leave_their_marks(cases):
    target = _data(cases["nan_weight"], "target")
    first = next(k for k, v in target.items() if "NaN" in json.dumps(v))
    assert "NaN" in json.dumps(target[first]["input_args"][1:]) or "parameters" in target[first]
    stomp = [next(k for k, v in _data(cases["memory_stomp"], r).items() if "NaN" in json.dumps(v.get("output")))
             for r in ("target", "target_rerun")]
    assert stomp[0] != stomp[1]
    assert not any("NaN" in json.dumps(v) for v in _data(cases["memory_stomp"], "baseline").values())


def test_bad_arguments_are_precdx_errors(tmp_path):
    with pytest.raises(PrecdxError):
        run_demo("no_such_fault", tmp_path / "x")
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "mine.txt").write_text("keep me")
    with pytest.raises(PrecdxError):
        run_demo(DEFAULT_FAULT, tmp_path / "busy", steps=STEPS)
