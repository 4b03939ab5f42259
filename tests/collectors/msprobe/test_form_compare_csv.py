"""Issue 14, evidence form 'compare CSV only': msprobe's compare results localise like our own
comparison of the two dumps -- the same first API, kind and reason -- because their rows carry the
target and bench statistics of every tensor. Real msprobe 26.2.0 CSVs from shared samples; when
mindstudio-probe is installed, also CSVs written by `msprobe compare` from the scenario dumps."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from precdx.collectors.msprobe.tasks import DumpTask, run_task
from precdx.pipeline import collect, discover
from precdx.errors import Warnings
from precdx.facts import FactSet

from .conftest import collect_case, of_type, run_dir

BASE = "02_dump_mix_statistics/dump_path/step0/rank0/dump.json"


def _csv_facts(tmp_path: Path, csv: Path, role: str = "target", name: str | None = None):
    folder = tmp_path / (name or role) / "step0"
    folder.mkdir(parents=True)
    shutil.copy(csv, folder / csv.name)
    facts, warnings = collect_case([run_dir(role, tmp_path / (name or role))])
    return facts, list(warnings)


@pytest.mark.parametrize("csv, target", [
    ("09_compare_statistics_bf16/compare_result_20261129135411.csv", "09_compare_statistics_bf16/target_dump/step0/rank0/dump.json"),
    ("10_compare_statistics_eps/compare_result_20261129135419.csv", "10_compare_statistics_eps/target_dump/step0/rank0/dump.json"),
    ("13_nan_overflow/compare_result_nan_vs_base.csv", "13_nan_overflow/dump_path/step0/rank0/dump.json"),
    ("14_compare_unmatched_api/compare_result_extra_vs_base.csv", "14_compare_unmatched_api/target_dump.json"),
])
def test_csv_localises_like_the_dump_pair(samples: Path, tmp_path: Path, csv: str, target: str) -> None:
    rep = run_task(DumpTask(str(samples / target), str(samples / BASE)))
    facts, warnings = _csv_facts(tmp_path, samples / csv)
    assert warnings == []
    d = of_type(facts, "first_divergence", method="msprobe_compare")[0]
    assert (d.api, d.kind, d.reason) == (rep.first.api, rep.first.kind, rep.first.reason)
    if rep.first.code_line is not None:    # (sample 14 keeps no stack.json/construct.json)
        assert d.module == rep.first.module and d.code_line == rep.first.code_line
    if rep.run.first_nan is not None:
        n = of_type(facts, "first_nan", method="msprobe_compare")[0]
        assert (n.api, n.kind, n.value, n.module) == (rep.run.first_nan.api, rep.run.first_nan.kind,
                                                      rep.run.first_nan.value, rep.run.first_nan.module)
    extra = {(x.name, x.count) for x in of_type(facts, "dump_structure_diff")}
    assert extra == {(name, n) for (_, name), n in rep.run_only.items()}


def test_tensor_and_md5_csvs(samples: Path, tmp_path: Path) -> None:
    facts, _ = _csv_facts(tmp_path, samples / "12_compare_tensor/compare_result_tensor_bf16_vs_base.csv")
    d = of_type(facts, "first_divergence")[0]
    assert (d.api, d.kind, d.reason, d.dtype, d.dtype_against) == (
        "Torch.matmul.0.forward", "introduced", "dtype", "torch.bfloat16", "torch.float32")
    facts, _ = _csv_facts(tmp_path / "md5", samples / "11_compare_md5/compare_result_md5_eps_vs_base.csv")
    d = of_type(facts, "first_divergence")[0]
    assert (d.api, d.kind) == ("Functional.layer_norm.0.forward", "introduced")


def test_md5_rerun_csv_all_pass_is_reproducible(samples: Path, tmp_path: Path) -> None:
    facts, _ = _csv_facts(tmp_path, samples / "11_compare_md5/compare_result_md5_rerun_vs_base.csv", "target_rerun")
    assert not of_type(facts, "nondeterministic_api")
    step = of_type(facts, "dump_step_compare")[0]
    assert step.all_match and step.mode == "md5" and step.n_compared == 67


def _rerun_pair_csv(samples: Path, csv: Path) -> Path:
    """The sample statistics CSV made into the rerun pair of its *base* dump (bench = NPU
    everywhere), with one output statistic nudged in its last bits; written to `csv`."""
    import csv as _csv
    import io
    src = (samples / "10_compare_statistics_eps/compare_result_20261129135419.csv").read_text()
    rows = list(_csv.reader(io.StringIO(src)))
    col = {n: i for i, n in enumerate(rows[0])}
    for r in rows[1:]:
        for k in ("max", "min", "mean", "l2norm"):
            r[col[f"NPU {k}"]] = r[col[f"Bench {k}"]]
        if r[0] == "Functional.softmax.0.forward.output.0":
            r[col["NPU mean"]] = repr(float(r[col["Bench mean"]]) * (1 + 2 ** -20))
    out = io.StringIO()
    _csv.writer(out, lineterminator="\n").writerows(rows)
    csv.write_text(out.getvalue())
    return csv


def test_rerun_csv_names_the_nondeterministic_api(samples: Path, tmp_path: Path) -> None:
    """A target-vs-rerun CSV (in the rerun's folder, as msprobe compare -tp writes it): one output
    statistic differs in the last bits while the inputs are equal."""
    csv = _rerun_pair_csv(samples, tmp_path / "compare_result_rank0_20261129000000.csv")
    facts, _ = _csv_facts(tmp_path / "case", csv, "target_rerun")
    n = of_type(facts, "nondeterministic_api")[0]
    assert (n.api, n.kind, n.mode, n.role) == ("Functional.softmax.0.forward", "nondeterministic_op", "exact", "target_rerun")
    assert not of_type(facts, "first_divergence")


def test_legacy_csv_pairs_and_localises(upstream: Path, tmp_path: Path) -> None:
    legacy = upstream / "msprobe/test/msprobe_test/resources/compare_result_20230703104808.csv"
    facts, warnings = _csv_facts(tmp_path, legacy)
    step = of_type(facts, "dump_step_compare")[0]
    assert step.n_compared == 3 and step.all_match and warnings == []
    import csv as _csv
    import io
    rows = list(_csv.reader(io.StringIO(legacy.read_text())))
    npu_max = rows[0].index("NPU max")
    for r in rows[1:]:
        if r[0] == "Functional_linear_0_forward_output":
            r[npu_max] = repr(float(r[npu_max]) * 1.5)
    buf = io.StringIO()
    _csv.writer(buf, lineterminator="\n").writerows(rows)
    out = [buf.getvalue().rstrip("\n")]
    edited = tmp_path / "edited" / "compare_result_20230703104808.csv"
    edited.parent.mkdir()
    edited.write_text("\n".join(out) + "\n")
    facts, _ = _csv_facts(tmp_path / "e", edited)
    d = of_type(facts, "first_divergence")[0]
    assert (d.api, d.kind) == ("Functional.linear.0.forward", "introduced")


# ---- real `msprobe compare` on the scenario dumps ----------------------------------------------

_MSPROBE = Path(sys.executable).parent / "msprobe"
needs_msprobe = pytest.mark.skipif(not _MSPROBE.is_file(),
                                   reason="mindstudio-probe is not installed (pip install mindstudio-probe)")


def _msprobe_compare(target_step: Path, golden_step: Path, out: Path) -> Path:
    subprocess.run([str(_MSPROBE), "compare", "-tp", str(target_step), "-gp", str(golden_step), "-o", str(out)],
                   check=True, capture_output=True, timeout=300)
    return next(out.glob("compare_result_*.csv"))


def _csv_only_case(scenarios: Path, tmp_path: Path, case: str, run: str, golden: str) -> Path:
    src = scenarios / case
    dst = tmp_path / case
    for step in sorted((src / run / "msprobe_dump").iterdir()):
        _msprobe_compare(step, src / golden / "msprobe_dump" / step.name, dst / run / "msprobe_compare" / step.name)
    if run != "target":
        (dst / "target").mkdir(parents=True, exist_ok=True)
        (dst / "target" / "README.txt").write_text("the target job; only its rerun's compare result was kept\n")
    return dst


@pytest.mark.slow  # runs the external `msprobe compare` on the scenario dumps
@needs_msprobe
@pytest.mark.parametrize("case, run, golden, mode, kind", [
    ("case-05", "target", "baseline", "model.weight_init_mismatch", "weights"),
    ("case-10", "target", "baseline", "data.input_mismatch", "data_input"),
    ("case-07", "target", "baseline", "optimizer.update_mismatch", "weights"),
    ("case-06", "target_rerun", "target", "determinism.nondeterministic_operator", "nondeterministic_op"),
])
def test_msprobe_compare_csv_only(scenarios: Path, tmp_path: Path, case, run, golden, mode, kind) -> None:
    root = _csv_only_case(scenarios, tmp_path, case, run, golden)
    w = Warnings()
    case_obj = discover(target=root / "target", target_reruns=[root / run] if run != "target" else [],
                        warnings=w)
    facts = collect(case_obj, w)
    assert isinstance(facts, FactSet)
    located = [f for f in facts if f.type in ("first_divergence", "nondeterministic_api")]
    assert located and located[-1].kind == kind
    from precdx.diagnosis import diagnose
    out = diagnose(facts, warnings=w)
    assert out.hypotheses[0].failure_mode == mode
    assert out.verdict == "misaligned"


def test_rerun_csv_is_told_by_its_rows_in_any_folder(samples: Path, tmp_path: Path) -> None:
    """Issue 14: a target-vs-rerun CSV kept in the target's own folder is still a rerun comparison:
    the linear before the first difference is bit-identical on both sides (kernels never agree to
    the last bit across devices) and the first differing API got identical inputs and is off in
    the last digits only."""
    from precdx.collectors.msprobe.compare_result import read_compare_result
    csv = _rerun_pair_csv(samples, tmp_path / "compare_result_rank0_20261129000001.csv")
    assert read_compare_result(csv, Warnings()).same_device
    facts, _ = _csv_facts(tmp_path / "case", csv, "target")
    n = of_type(facts, "nondeterministic_api")[0]
    assert (n.api, n.kind, n.mode, n.role, n.against_role) == (
        "Functional.softmax.0.forward", "nondeterministic_op", "exact", "target", "target")
    assert not of_type(facts, "first_divergence")
    # the shared samples compare a changed model with the base on one CPU: a dtype, a scalar
    # argument, a NaN or an extra API is no rerun, although the matmuls before it are bit-identical
    for name in ("09_compare_statistics_bf16/compare_result_20261129135411.csv",
                 "10_compare_statistics_eps/compare_result_20261129135419.csv",
                 "13_nan_overflow/compare_result_nan_vs_base.csv",
                 "14_compare_unmatched_api/compare_result_extra_vs_base.csv"):
        assert not read_compare_result(samples / name, Warnings()).same_device, name
