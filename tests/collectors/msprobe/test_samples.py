"""Every msprobe 26.2.0 sample in shared/msprobe-samples through the readers and our comparison:
the first diverging API, the first NaN location and the md5 first difference each one holds."""
from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest

from precdx.collectors.msprobe import analysis_json, compare_result, config_check, monitor
from precdx.collectors.msprobe.sniff import sniff
from precdx.collectors.msprobe.tasks import DumpTask, run_task
from precdx.errors import Warnings

from .conftest import collect_case, of_type, run_dir

BASE = "02_dump_mix_statistics/dump_path/step0/rank0/dump.json"


def _task(samples: Path, run: str, against: str | None = None, exact: bool = False):
    rep = run_task(DumpTask(str(samples / run), str(samples / against) if against else None, exact))
    assert rep.fatal is None
    return rep


@pytest.mark.parametrize("dump, task, level, mode, apis, modules", [
    ("01_dump_L1_statistics/dump_path/step0/proc10287/dump.json", "statistics", "L1", "statistics", 187, 0),
    ("02_dump_mix_statistics/dump_path/step1/rank0/dump.json", "statistics", "mix", "statistics", 34, 33),
    ("02b_dump_mix_with_optimizer_step0/dump_path/step0/rank0/dump.json", "statistics", "mix", "statistics", None, 33),
    ("03_dump_L0_statistics/dump_path/step0/rank0/dump.json", "statistics", "L0", "statistics", 0, 33),
    ("04_dump_L1_tensor/dump_path/step0/rank0/dump.json", "tensor", "L1", "statistics", 34, 0),
    ("05_dump_md5/dump_path/step0/rank0/dump.json", "statistics", "mix", "md5", 34, 33),
    ("06_dump_xor/dump_path/step0/rank0/dump.json", "statistics", "L1", "xor", 34, 0),
    ("07_dump_structure/dump_path/step0/rank0/dump.json", "structure", "mix", "none", 0, 0),
])
def test_dump_readers(samples: Path, dump, task, level, mode, apis, modules) -> None:
    rep = _task(samples, dump)
    assert (rep.run.task, rep.run.level, rep.run.summary_mode) == (task, level, mode)
    if apis is not None:
        assert rep.run.api_count == apis
    assert rep.run.module_count == modules
    assert rep.run.complete and rep.run.first_nan is None and not rep.warnings


def test_bf16_matmul_is_the_first_divergence(samples: Path) -> None:
    rep = _task(samples, "09_compare_statistics_bf16/target_dump/step0/rank0/dump.json", BASE)
    f = rep.first
    assert (f.api, f.api_name, f.family, f.kind, f.reason) == (
        "Torch.matmul.0.forward", "Torch.matmul", "matmul", "introduced", "dtype")
    assert f.dtype != f.dtype_against and f.module == "block.attn" and "torch.matmul" in f.code_line


@pytest.mark.parametrize("target, base", [
    ("10_compare_statistics_eps/target_dump/step0/rank0/dump.json", BASE),
    ("11_compare_md5/target_dump_eps/step0/rank0/dump.json", "05_dump_md5/dump_path/step0/rank0/dump.json"),
])
def test_layer_norm_eps_is_the_first_divergence(samples: Path, target: str, base: str) -> None:
    rep = _task(samples, target, base)
    assert rep.first.api == "Functional.layer_norm.0.forward"
    assert (rep.first.kind, rep.first.reason, rep.first.label) == ("introduced", "scalar_arg", "error")
    assert rep.first.module == "block.ln1"


def test_md5_first_difference(samples: Path) -> None:
    # the eps dump against the md5 base as a rerun pair: checksums decide, first difference is the
    # layer norm, whose tensor inputs are identical but whose eps argument differs
    rep = _task(samples, "11_compare_md5/target_dump_eps/step0/rank0/dump.json",
                "05_dump_md5/dump_path/step0/rank0/dump.json", exact=True)
    assert rep.mode == "md5"
    assert rep.first.api == "Functional.layer_norm.0.forward" and rep.first.kind == "input_differs"
    same = _task(samples, "05_dump_md5/dump_path/step0/rank0/dump.json",
                 "05_dump_md5/dump_path/step0/rank0/dump.json", exact=True)
    assert same.first is None and same.n_diverged == 0 and same.n_compared == 67


def test_tensor_mode_dump_compares_on_its_statistics(samples: Path) -> None:
    rep = _task(samples, "12_compare_tensor/target_bf16_dump/dump.json",
                "04_dump_L1_tensor/dump_path/step0/rank0/dump.json")
    assert rep.first.api == "Torch.matmul.0.forward" and rep.first.reason == "dtype"


def test_nan_sample_first_nan_and_structure(samples: Path) -> None:
    rep = _task(samples, "13_nan_overflow/dump_path/step0/rank0/dump.json", BASE)
    nan = rep.run.first_nan
    assert (nan.api, nan.kind, nan.value, nan.module) == (
        "Tensor.__mul__.1.forward", "operator_output", "nan", "block.attn")
    assert "1e38" in nan.code_line
    assert rep.run_only == {("api", "Tensor.__mul__"): 4}      # the extra multiplications
    assert rep.first.api == "Functional.softmax.0.forward"     # first paired API that departs
    assert rep.first.kind == "wiring"                          # fed by the unmatched multiply
    assert rep.nan_baseline_abnormal is None                   # no counterpart on the baseline


def test_unmatched_api_is_a_structure_difference(samples: Path) -> None:
    rep = _task(samples, "14_compare_unmatched_api/target_dump.json", BASE)
    assert rep.run_only == {("api", "Torch.relu"): 2} and rep.against_only == {}
    assert rep.first.api == "Functional.linear.3.forward" and rep.first.kind == "wiring"


def test_two_rank_nan_origin_is_rank1(samples: Path) -> None:
    root = samples / "15_distributed_2rank_gloo/dump_nan_op_on_rank1"
    facts, warnings = collect_case([run_dir("target", root)])
    nans = {f.rank: f for f in of_type(facts, "first_nan", method="ours")}
    assert nans[1].api == "Tensor.__mul__.1.forward" and nans[1].kind == "operator_output"
    assert nans[0].api == "Distributed.all_reduce.0.forward" and nans[0].kind == "communication"
    assert nans[0].origin_rank == nans[1].origin_rank == 1
    assert nans[1].is_origin_rank and not nans[0].is_origin_rank
    assert len(of_type(facts, "dump_info")) == 2 and not list(warnings)


def test_overflow_check_outputs(samples: Path) -> None:
    one = analysis_json.read_analysis(
        samples / "13_nan_overflow/overflow_check_out/anomaly_analyze_1795960589926640976.json", anomaly=True)
    assert [(n.rank, n.api, n.kind, n.module) for n in one] == [
        (0, "Tensor.__mul__.1.forward", "operator_output", "block.attn")]
    ranks = analysis_json.read_analysis(
        samples / "15_distributed_2rank_gloo/overflow_check/anomaly_analyze_nan_op_on_rank1.json", anomaly=True)
    assert [(n.rank, n.api_name) for n in ranks] == [(1, "Tensor.__mul__")]
    weight = analysis_json.read_analysis(
        samples / "15_distributed_2rank_gloo/overflow_check/anomaly_analyze_inf_weight_on_rank1.json", anomaly=True)
    assert [(n.rank, n.api, n.kind) for n in weight] == [(0, "Distributed.all_reduce.0.forward", "communication")]


@pytest.mark.parametrize("rel, first", [
    ("09_compare_statistics_bf16/diff_analyze_1795960538331096912.json", "Functional.layer_norm.2.forward"),
    ("10_compare_statistics_eps/diff_analyze_1795960531747800327.json", "Functional.layer_norm.0.forward"),
    ("11_compare_md5/diff_analyze_1795960544907491218.json", "Functional.layer_norm.0.forward"),
])
def test_diff_analyze_outputs(samples: Path, rel: str, first: str) -> None:
    nodes = analysis_json.read_analysis(samples / rel, anomaly=False)
    assert nodes[0].api == first and nodes[0].rank == 0
    assert sniff(samples / rel, (samples / rel).read_bytes()[:65536]).kind == "msprobe.diff_analyze"


@pytest.mark.parametrize("rel, mode, first, label, unmatched", [
    ("09_compare_statistics_bf16/compare_result_20261129135411.csv", "statistics", "Torch.matmul.0.forward", "error", 0),
    ("10_compare_statistics_eps/compare_result_20261129135419.csv", "statistics", "Functional.layer_norm.0.forward", "error", 0),
    ("11_compare_md5/compare_result_md5_eps_vs_base.csv", "md5", "Functional.layer_norm.0.forward", "error", 0),
    ("11_compare_md5/compare_result_md5_rerun_vs_base.csv", "md5", None, None, 0),
    ("12_compare_tensor/compare_result_tensor_bf16_vs_base.csv", "tensor", "Torch.matmul.0.forward", "error", 0),
    ("12_compare_tensor/compare_result_tensor_nan_vs_base.csv", "tensor", "Functional.softmax.0.forward", "error", 4),
    ("13_nan_overflow/compare_result_nan_vs_base.csv", "statistics", "Functional.softmax.0.forward", "error", 4),
    ("14_compare_unmatched_api/compare_result_extra_vs_base.csv", "statistics", "Functional.linear.4.forward", "warning", 2),
    ("15_distributed_2rank_gloo/compare_result_rank1_20261129135603.csv", "statistics", "Functional.softmax.0.forward", "error", 4),
])
def test_compare_result_csvs(samples: Path, rel, mode, first, label, unmatched) -> None:
    w = Warnings()
    res = compare_result.read_compare_result(samples / rel, w)
    assert res.mode == mode and not list(w)
    flagged = res.first_flagged()
    assert (flagged.api if flagged else None) == first
    assert (flagged.label if flagged else None) == label
    assert sum(1 for a in res.apis if a.unmatched) == unmatched
    if "rank1" in rel:
        assert res.rank == 1


def test_compare_result_xlsx(samples: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = samples / "10_compare_statistics_eps/compare_result_20261129135426.xlsx"
    pytest.importorskip("openpyxl")
    w = Warnings()
    res = compare_result.read_compare_result(path, w)
    assert res.first_flagged().api == "Functional.layer_norm.0.forward" and res.n_rows == 193


def test_xlsx_without_openpyxl_is_a_warning(samples: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins
    real_import = builtins.__import__

    def no_openpyxl(name, *args, **kw):
        if name == "openpyxl":
            raise ImportError("no openpyxl")
        return real_import(name, *args, **kw)

    monkeypatch.setattr(builtins, "__import__", no_openpyxl)
    w = Warnings()
    path = samples / "10_compare_statistics_eps/compare_result_20261129135426.xlsx"
    assert compare_result.read_compare_result(path, w) is None
    assert "openpyxl" in list(w)[0]["message"] and list(w)[0]["path"] == str(path)
    assert config_check.read_result_workbook(samples / "17_config_check/result_dynamic/result.xlsx", w) == []


def test_config_check_outputs(samples: Path) -> None:
    ckpt = config_check.read_ckpt_similarity(samples / "17_config_check/ckpt_similarity.json")
    assert ckpt[-1].item == "all_parameters"
    pytest.importorskip("openpyxl")
    lines = config_check.read_result_workbook(samples / "17_config_check/result_dynamic/result.xlsx", Warnings())
    summary = {ln.item: ln.level for ln in lines if ln.section == "summary"}
    assert summary["env"] == "error" and summary["pip"] == "pass" and summary["dataset"] == "error"
    hyper = {ln.item: ln for ln in lines if ln.section == "hyperparameters"}
    assert hyper["attention-dropout"].level == "error"
    assert (hyper["attention-dropout"].bench_value, hyper["attention-dropout"].cmp_value) == ("0.0", "0.1")


def test_monitor_v1_and_v2_find_the_inf_weight_step(samples: Path) -> None:
    w = Warnings()
    base = monitor.group_tables(sorted((samples / "18_monitor_v1/out_base").rglob("*.csv")), w)
    bad = monitor.group_tables(sorted((samples / "18_monitor_v1/out_nan_inf_weight_step2").rglob("*.csv")), w)
    res = monitor.compare_tables(bad["grad_reduced"], base["grad_reduced"], "grad_reduced")
    assert res.nonfinite_step == 2 and res.n_params > 0
    v2 = monitor.group_tables(sorted((samples / "19_monitor_v2/monv2_out").rglob("*.csv")), w)
    assert "grad_reduced" in v2 and ("embed.weight", 2) in v2["grad_reduced"]
    assert math.isnan(v2["grad_reduced"][("embed.weight", 2)]["norm"])
    assert not list(w)


def test_monitor_alerts(samples: Path) -> None:
    alerts = monitor.read_alerts(samples / "18_monitor_v1/out_nan_inf_weight_step2/anomaly_detected/rank0/anomaly.json")
    assert alerts and all(a.rule == "AnomalyNan" for a in alerts)
    benign = [a for a in alerts if a.benign]
    real = [a for a in alerts if not a.benign]
    assert {a.target for a in benign} <= {".input", "embed.input"}
    assert real and min(a.step for a in real) == 2
    analysed = monitor.read_alerts(samples / "18_monitor_v1/out_nan_inf_weight_step2/anomaly_detected/anomaly_analyse.json")
    assert analysed


def test_sniff_recognises_every_kind(samples: Path) -> None:
    expect = {
        "02_dump_mix_statistics/dump_path/step0/rank0/dump.json": "msprobe.dump",
        "02_dump_mix_statistics/dump_path/step0/rank0/stack.json": "msprobe.stack",
        "02_dump_mix_statistics/dump_path/step0/rank0/construct.json": "msprobe.construct",
        "08_debug_save/dump_path/step0/proc16229/debug.json": "msprobe.debug",
        "11_compare_md5/compare_result_md5_eps_vs_base.csv": "msprobe.compare_result",
        "10_compare_statistics_eps/compare_result_20261129135426.xlsx": "msprobe.compare_result",
        "13_nan_overflow/overflow_check_out/anomaly_analyze_1795960589926640976.json": "msprobe.anomaly_analyze",
        "18_monitor_v1/out_base/Nov29_21-45-21-rank0-fd7ec2b2/grad_reduced_0-0.csv": "msprobe.monitor",
        "19_monitor_v2/monv2_out/rank_0/weight_grad_step0-0.csv": "msprobe.monitor",
        "18_monitor_v1/out_nan_inf_weight_step2/anomaly_detected/rank0/anomaly.json": "msprobe.monitor_alerts",
        "17_config_check/result_dynamic/result.xlsx": "msprobe.config_check",
        "17_config_check/ckpt_similarity.json": "msprobe.ckpt_similarity",
    }
    for rel, kind in expect.items():
        p = samples / rel
        art = sniff(p, p.read_bytes()[:65536])
        assert art is not None and art.kind == kind, rel
    for rel in ("02_dump_mix_statistics/config.json", "02_dump_mix_statistics/console_log.txt",
                "17_config_check/inputs/train_bench.sh"):
        p = samples / rel
        assert sniff(p, p.read_bytes()[:65536]) is None, rel


def test_collect_sample_pair_end_to_end(samples: Path, tmp_path: Path) -> None:
    # lay the eps sample out as a case: target dump + its compare CSV and -da json, baseline dump
    target = tmp_path / "target"
    shutil.copytree(samples / "10_compare_statistics_eps/target_dump", target / "msprobe_dump")
    shutil.copy(samples / "10_compare_statistics_eps/compare_result_20261129135419.csv", target)
    shutil.copy(samples / "10_compare_statistics_eps/diff_analyze_1795960531747800327.json", target)
    baseline = tmp_path / "baseline"
    shutil.copytree(samples / "02_dump_mix_statistics/dump_path", baseline / "msprobe_dump")
    facts, warnings = collect_case([run_dir("target", target), run_dir("baseline", baseline)])
    firsts = {f.method: f for f in of_type(facts, "first_divergence")}
    assert set(firsts) == {"ours", "msprobe_compare", "diff_analyze"}
    assert all(f.api_name == "Functional.layer_norm" for f in firsts.values())
    assert firsts["ours"].kind == "introduced" and firsts["ours"].code_line
    assert of_type(facts, "compare_result_summary")[0].n_error >= 1
    # baseline has step1 too: reported as not compared, not silently dropped
    assert any("step 1" in w["message"] for w in warnings)
    assert {(f.role, f.step) for f in of_type(facts, "dump_info")} == {("target", 0), ("baseline", 0), ("baseline", 1)}


def test_several_msprobe_outputs_in_one_run_never_contradict(samples: Path) -> None:
    # 15_ holds two overflow_check outputs and a compare CSV in one folder
    facts, warnings = collect_case([run_dir("target", samples / "15_distributed_2rank_gloo")])
    keys = [f.key() for f in facts]
    assert len(keys) == len(set(keys))
    nan = {f.rank: f.api for f in of_type(facts, "first_nan", method="overflow_check")}
    assert nan[1] == "Tensor.__mul__.1.forward"
    assert of_type(facts, "first_divergence", method="msprobe_compare")[0].api_name == "Functional.softmax"
