"""Older msprobe/ptdbg schemas from upstream repositories (read in place) parse, and malformed
upstream stubs give warnings, never tracebacks."""
from __future__ import annotations

from pathlib import Path

from precdx.collectors.msprobe import compare_result
from precdx.collectors.msprobe.context import code_lines, module_paths
from precdx.collectors.msprobe.tasks import DumpTask, run_task
from precdx.errors import Warnings

from .conftest import collect_case, of_type, run_dir

GPU = "msprobe/examples/quick_start/gpu_dump"
MS = "msprobe/test/msprobe_test/mindspore_ut/compare/dump_file"


def test_gpu_resnet_dump_steps_compare(upstream: Path) -> None:
    rep = run_task(DumpTask(str(upstream / GPU / "step1/proc2016/dump.json"),
                            str(upstream / GPU / "step0/proc2016/dump.json")))
    assert rep.fatal is None and rep.run.level == "mix" and rep.run.framework == "pytorch"
    assert rep.run.api_count + rep.run.module_count == 760
    # parameters_grad counters keep counting across steps in this version: .1 vs .0 pair by fallback
    assert rep.n_fallback > 0
    assert rep.first is not None and rep.first.kind == "weights"   # one optimizer step later


def test_old_stack_and_construct_layouts(upstream: Path) -> None:
    w = Warnings()
    folder = upstream / MS / "pytorch_data"
    names = ["NPU.npu_fusion_attention.0.forward", "Torch.cos.0.forward"]
    lines = code_lines(folder / "stack.json", names, w)
    assert set(lines) == set(names)
    paths = module_paths(folder / "construct.json", names, w)   # top-level parent "" (2024 form)
    assert paths and not list(w)


def test_frameworks_and_versions_scan(upstream: Path) -> None:
    for rel, fw in [(f"{MS}/mindspore_data/dump.json", "mindspore"), (f"{MS}/pytorch_data/dump.json", "pytorch"),
                    ("mstt@f3227fa/debug/accuracy_tools/msprobe/test/mindspore_ut/compare/dump_file/mindspore_data/dump.json", "mindspore"),
                    ("mstt@8e5626c/debug/accuracy_tools/msprobe/test/mindspore_ut/compare/dump_file/pytorch_data/dump.json", "pytorch"),
                    ("msprobe/test/msprobe_test/pytorch_ut/api_accuracy_checker/run_ut/dump.json", "pytorch")]:
        rep = run_task(DumpTask(str(upstream / rel)))
        assert rep.fatal is None and rep.run.complete and rep.run.framework == fw, rel
        assert rep.run.api_count + rep.run.module_count > 0


def test_mindspore_vs_pytorch_names_are_unmatched_not_crashing(upstream: Path) -> None:
    rep = run_task(DumpTask(str(upstream / MS / "mindspore_data/dump.json"), str(upstream / MS / "pytorch_data/dump.json")))
    assert rep.fatal is None and rep.run_only and rep.against_only


def test_legacy_compare_csvs(upstream: Path) -> None:
    w = Warnings()
    for name in ("compare_result_20230703104808.csv", "compare_result_without_accuracy.csv"):
        res = compare_result.read_compare_result(upstream / "msprobe/test/msprobe_test/resources" / name, w)
        assert res.mode == "legacy" and res.n_rows == 8
        assert res.apis[0].api == "Functional.linear.0.forward"


def test_malformed_layouts_warn(upstream: Path) -> None:
    root = upstream / "msprobe/test/msprobe_test/visualization_ut/input"
    facts, warnings = collect_case([run_dir("target", root)])
    messages = " | ".join(w["message"] for w in warnings)
    assert "no entries" in messages            # the {} dump.json files
    infos = of_type(facts, "dump_info")
    assert infos and all(f.complete for f in infos)


def test_malformed_dump_bodies(upstream: Path) -> None:
    res = upstream / "msprobe/test/msprobe_test/resources/common"
    for name in ("test_backward.json", "test_no_dump_data.json", "test_no_fb_data.json"):
        rep = run_task(DumpTask(str(res / name)))
        assert rep.fatal is None
