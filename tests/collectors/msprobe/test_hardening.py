"""Inputs found by the hardening corpus (tests/corpus, tests/fuzz): damaged or odd msprobe files
give warnings naming the file, never a traceback."""
from __future__ import annotations

from pathlib import Path

import pytest

from engine.collectors.msprobe import api_checks
from engine.collectors.msprobe.compare_result import read_compare_result
from engine.collectors.msprobe.csvtext import FIELD_LIMIT
from engine.collectors.msprobe.monitor import read_monitor_csv
from engine.errors import PrecdxError, Warnings
from tests.corpus import healthy


def _messages(w: Warnings, path: Path) -> list[str]:
    return [x["message"] for x in w if x.get("path") == str(path)]


def _compare(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "compare_result_rank0_20250101.csv"
    p.write_text(text, newline="")
    return p


# ---------------------------------------------------------------- compare results
def test_compare_long_cell_is_read(tmp_path: Path) -> None:
    rows = healthy.compare_csv().splitlines()
    rows[1] = rows[1].rsplit(",", 1)[0] + ',"' + "File x.py, line 1, in f " * 12_000 + '"'
    p = _compare(tmp_path, "\n".join(rows) + "\n")
    w = Warnings()
    res = read_compare_result(p, w)
    assert res is not None and len(res.apis) == 2 and not list(w)


def test_compare_cell_over_limit_is_a_warning(tmp_path: Path) -> None:
    rows = healthy.compare_csv().splitlines()
    rows[2] = rows[2].rsplit(",", 1)[0] + ',"' + "y" * (FIELD_LIMIT + 10) + '"'
    p = _compare(tmp_path, "\n".join(rows) + "\n")
    w = Warnings()
    res = read_compare_result(p, w)
    assert res is not None and [a.api for a in res.apis] == ["Functional.linear.0.forward"]
    msgs = _messages(w, p)
    assert any("cannot be read past line 3" in m and "field larger than field limit" in m for m in msgs), msgs


def test_compare_stray_carriage_return(tmp_path: Path) -> None:
    rows = healthy.compare_csv().splitlines()
    rows[2] = rows[2].replace("torch.float32,", "torch.float32\r,", 1)
    p = _compare(tmp_path, "\n".join(rows) + "\n")
    w = Warnings()
    res = read_compare_result(p, w)
    assert res is not None
    assert any("stray carriage return inside line 3" in m for m in _messages(w, p)), list(w)


def test_compare_quoted_carriage_return_is_fine(tmp_path: Path) -> None:
    rows = healthy.compare_csv().splitlines()
    rows[1] = rows[1].rsplit(",", 1)[0] + ',"a\rb"'
    p = _compare(tmp_path, "\n".join(rows) + "\n")
    w = Warnings()
    assert len(read_compare_result(p, w).apis) == 2 and not list(w)


def test_compare_header_only_and_missing_columns(tmp_path: Path) -> None:
    p = _compare(tmp_path, healthy.COMPARE_HEADER + "\n")
    w = Warnings()
    read_compare_result(p, w)
    assert any("no data rows" in m for m in _messages(w, p))
    header = healthy.COMPARE_HEADER.replace("NormRelativeErr,", "").replace("Result,", "")
    p2 = tmp_path / "sub" / "compare_result_rank0_2.csv"
    p2.parent.mkdir()
    p2.write_text(header + "\n")
    w = Warnings()
    read_compare_result(p2, w)
    assert any("lacks the column(s) NormRelativeErr, Result" in m for m in _messages(w, p2)), list(w)


def test_healthy_compare_has_no_warnings(tmp_path: Path) -> None:
    w = Warnings()
    read_compare_result(_compare(tmp_path, healthy.compare_csv()), w)
    assert not list(w)


# ---------------------------------------------------------------- monitor tables
def _monitor(tmp_path: Path, text: str) -> Path:
    d = tmp_path / "Jul17_13-48-37-rank0-18524850"
    d.mkdir(exist_ok=True)
    p = d / "grad_reduced_0-9.csv"
    p.write_text(text, newline="")
    return p


@pytest.mark.parametrize("step", ["inf", "-inf", "nan", "1e999", "-3", "2.5"])
def test_monitor_bad_steps_are_skipped(tmp_path: Path, step: str) -> None:
    rows = healthy.monitor_csv(0, 2).splitlines()
    rows[3] = rows[3].replace(",1,", f",{step},", 1)
    p = _monitor(tmp_path, "\n".join(rows) + "\n")
    w, into = Warnings(), {}
    read_monitor_csv(p, into, w)
    assert len(into["grad_reduced"]) == 5
    assert any("without step or name were skipped" in m for m in _messages(w, p))


def test_monitor_step_as_float_text(tmp_path: Path) -> None:
    p = _monitor(tmp_path, healthy.monitor_csv(0, 1).replace(",1,-0.02", ",1.0,-0.02"))
    w, into = Warnings(), {}
    read_monitor_csv(p, into, w)
    assert {s for _, s in into["grad_reduced"]} == {0, 1} and not list(w)


def test_monitor_header_only_missing_norm_and_long_cell(tmp_path: Path) -> None:
    p = _monitor(tmp_path, healthy.MONITOR_HEADER + "\n")
    w = Warnings()
    read_monitor_csv(p, {}, w)
    assert any("grad_reduced has no data rows" in m for m in _messages(w, p))
    p = _monitor(tmp_path, healthy.monitor_csv(0, 1).replace(",norm,", ",other,"))
    w = Warnings()
    read_monitor_csv(p, {}, w)
    assert any("grad_reduced has no 'norm' column" in m for m in _messages(w, p))
    p = _monitor(tmp_path, healthy.monitor_csv(0, 1).replace("torch.float32", '"' + "y" * 300_000 + '"', 1))
    w, into = Warnings(), {}
    read_monitor_csv(p, into, w)
    assert len(into["grad_reduced"]) == 4 and not list(w)


# ---------------------------------------------------------------- API checks
def test_api_check_csv_errors_name_the_file(tmp_path: Path) -> None:
    p = tmp_path / "free_benchmark.csv"
    p.write_text("rank,pert_mode,stage,step,api_name,max_rel,dtype\n"
                 "inf,improve,forward,nan,Functional.gelu.0,0.1,torch.float16\n"
                 '0,x,forward,0,Functional.gelu.1,0.1,"' + "z" * (FIELD_LIMIT + 1) + '"\n')
    with pytest.raises(PrecdxError) as exc:
        api_checks.read_free_benchmark(p)
    assert exc.value.path == str(p) and exc.value.line == 3
    p.write_text("rank,pert_mode,stage,step,api_name,max_rel,dtype\n"
                 "inf,improve,forward,nan,Functional.gelu.0,0.1,torch.float16\n")
    line, = api_checks.read_free_benchmark(p)
    assert (line.rank, line.step) == (0, 0)
