"""Inputs found by the hardening corpus (tests/corpus, tests/fuzz): damaged or odd msprobe files
give warnings naming the file, never a traceback."""
from __future__ import annotations

from pathlib import Path

import pytest

from precdx.collectors.msprobe import api_checks
from precdx.collectors.msprobe.compare_result import read_compare_result
from precdx.collectors.msprobe.csvtext import FIELD_LIMIT
from precdx.collectors.msprobe.monitor import read_monitor_csv
from precdx.errors import PrecdxError, Warnings
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


# ---------------------------------------------------------------- dump.json, stack.json, construct.json
import json  # noqa: E402

from precdx.collectors.msprobe.context import code_lines, module_paths  # noqa: E402
from precdx.collectors.msprobe.entries import MAX_DEPTH  # noqa: E402
from precdx.collectors.msprobe.jsonstream import NestingGuard, NestingTooDeep, load_small_json  # noqa: E402
from precdx.collectors.msprobe.tasks import DumpTask, run_task  # noqa: E402


def _pair(tmp_path: Path, run_text: str) -> tuple[DumpTask, Path]:
    paths = []
    for side, text in (("run", run_text), ("against", json.dumps(healthy.dump_json(), indent=1))):
        d = tmp_path / side / "step0" / "rank0"
        d.mkdir(parents=True)
        (d / "dump.json").write_text(text)
        paths.append(d / "dump.json")
    return DumpTask(str(paths[0]), str(paths[1])), paths[0]


def _task_messages(tmp_path: Path, run_text: str):
    task, run = _pair(tmp_path, run_text)
    rep = run_task(task)
    assert rep.fatal is None
    return rep, [m for m, p in rep.warnings if p == str(run)]


def test_non_numeric_statistics_are_missing(tmp_path: Path) -> None:
    d = healthy.dump_json()
    d["data"]["Functional.gelu.0.forward"]["output"][0].update({"Norm": [1, 2], "Max": "abc", "Min": True})
    rep, msgs = _task_messages(tmp_path, json.dumps(d))
    assert any("3 statistic(s) that are not numbers (first: Max of Functional.gelu.0.forward output.0)" in m
               for m in msgs), msgs
    assert rep.n_compared == 3


def test_entry_bodies_that_are_not_objects(tmp_path: Path) -> None:
    d = healthy.dump_json()
    d["data"]["Functional.gelu.0.forward"] = 42
    _, msgs = _task_messages(tmp_path, json.dumps(d))
    assert any("1 entry body(ies) that are not JSON objects (first: Functional.gelu.0.forward)" in m
               for m in msgs), msgs


def test_deep_arguments_are_cut_once_per_file(tmp_path: Path) -> None:
    d = healthy.dump_json()
    deep: object = 1.0
    for _ in range(200):
        deep = [deep]
    d["data"]["Functional.linear.0.forward"]["input_kwargs"] = {"deep": deep}
    d["data"]["Functional.gelu.0.forward"]["input_kwargs"] = {"deep": deep}
    rep, msgs = _task_messages(tmp_path, json.dumps(d))
    deep_msgs = [m for m in msgs if f"nested more than {MAX_DEPTH} levels" in m]
    assert len(deep_msgs) == 1 and "2 argument(s)" in deep_msgs[0], msgs
    assert rep.n_compared == 3


def test_hugely_nested_dump_stops_with_a_warning(tmp_path: Path) -> None:
    text = json.dumps(healthy.dump_json(), indent=1)
    n = 100_000
    text = text.replace('"Module.mlp.MLP.forward.0"', '"Functional.x.0.forward": {"output": ' + "[" * n + "1" +
                        "]" * n + '}, "Module.mlp.MLP.forward.0"', 1)
    rep, msgs = _task_messages(tmp_path, text)
    assert any("nested more than 1000 levels deep" in m for m in msgs), msgs
    assert rep.run is not None and not rep.run.complete   # (checked per 1 MiB block: a small file stops at once)


def test_big_integers_are_read_with_the_python_reader(tmp_path: Path) -> None:
    d = healthy.dump_json()
    d["data"]["Functional.linear.0.forward"]["output"][0]["Max"] = 2 ** 70
    d["data"]["Functional.gelu.0.forward"]["output"][0]["Norm"] = 10 ** 400
    rep, msgs = _task_messages(tmp_path, json.dumps(d))
    assert any("integer overflow" in m and "pure-Python" in m for m in msgs), msgs
    assert any("statistic(s) that are not numbers (first: Norm of Functional.gelu.0.forward" in m for m in msgs)
    assert rep.run.complete and rep.n_compared == 3 and rep.first is not None


def test_huge_number_text_is_still_a_damaged_dump(tmp_path: Path) -> None:
    d = json.dumps(healthy.dump_json()).replace("8.0", "9" * 6000, 1)
    _, msgs = _task_messages(tmp_path, d)
    assert any("dump.json is damaged" in m and "integer overflow" in m for m in msgs), msgs


def test_stack_and_construct_side_files(tmp_path: Path) -> None:
    stack = tmp_path / "stack.json"
    stack.write_text('{"0": "not a list", "1": [null, 5], "2": [["Functional.gelu.0.forward"], '
                     '["File /w/m.py, line 11, in forward, \\n return F.gelu(y)"]]}')
    w = Warnings()
    assert code_lines(stack, ["Functional.gelu.0.forward"], w) == {
        "Functional.gelu.0.forward": "m.py:11 return F.gelu(y)"}
    assert any("2 entry(ies) of an unexpected shape (first: '0')" in m for m in _messages(w, stack)), list(w)
    deep = "[" * 100_000 + "]" * 100_000
    stack.write_text('{"0": ' + deep + "}")
    w = Warnings()
    assert code_lines(stack, ["Functional.gelu.0.forward"], w) == {}
    assert any("nested more than 1000 levels deep" in m for m in _messages(w, stack))
    construct = tmp_path / "construct.json"
    construct.write_text('{"a": ' + deep + "}")
    w = Warnings()
    assert module_paths(construct, ["Functional.gelu.0.forward"], w) == {}
    assert any("nested more than 1000 levels deep" in m for m in _messages(w, construct))
    small = tmp_path / "analysis.json"
    small.write_text(deep)
    with pytest.raises(PrecdxError, match="nested more than 1000 levels deep"):
        load_small_json(small, what="analysis json")


def test_nesting_guard_ignores_brackets_in_strings() -> None:
    g = NestingGuard(3)
    text = b'{"a": "[[[[[[\\\\", "b": "\\"{{{{{{", "c": [[1]]}'
    for i in range(len(text)):          # every cut, also inside strings and escapes
        g = NestingGuard(3)
        g.feed(text[:i])
        g.feed(text[i:])
        assert g.depth == 0 and not g.in_string
    with pytest.raises(NestingTooDeep):
        NestingGuard(3).feed(b'{"a": [[[1]]]}')


def test_int_index_keeps_the_earliest_value_per_key():
    from precdx.collectors.msprobe.intindex import IntIndex
    idx = IntIndex()
    for key, value in [(5, 9), (-3, 1), (5, 2), (2**62, 7), (5, 4)]:
        idx.add(key, value)
    assert idx.get(5) == 2 and idx.get(-3) == 1 and idx.get(2**62) == 7
    assert idx.get(6) is None and 6 not in idx and -3 in idx and len(idx) == 3
    idx.add(6, 0)  # adding after a look-up re-sorts
    assert idx.get(6) == 0
    assert IntIndex().get(1) is None
