"""Property: the msprobe readers (dump.json comparison task, compare-result CSV, monitor CSV) never
raise anything but PrecdxError on any input; a per-rank dump task always returns a report.
The expected failures are bugs reported to the msprobe collector's owner (strict: they fail once
fixed, so the marker goes)."""
from __future__ import annotations

import pytest

import json
import tempfile
from pathlib import Path

from hypothesis import example, given
from hypothesis import strategies as st

from precdx.collectors.msprobe.compare_result import read_compare_result
from precdx.collectors.msprobe.monitor import read_monitor_csv
from precdx.collectors.msprobe.tasks import DumpTask, run_task
from precdx.errors import PrecdxError, Warnings
from tests.corpus import healthy

from .strategies import bounded, dumps, json_values, junk_text, numbers_as_text

pytestmark = pytest.mark.slow  # trains, dumps or fuzzes: outside the fast lane (pytest -m 'not slow')

GOOD_DUMP = json.dumps(healthy.dump_json(), indent=1).encode()
STAT_KEYS = ["type", "dtype", "shape", "Max", "Min", "Mean", "Norm", "requires_grad", "md5", "value"]
tensor_stats = st.dictionaries(st.sampled_from(STAT_KEYS), json_values, max_size=8)
entry_body = st.one_of(json_values, st.fixed_dictionaries({}, optional={
    "input_args": st.lists(st.one_of(tensor_stats, json_values), max_size=3),
    "input_kwargs": st.dictionaries(junk_text, tensor_stats, max_size=2),
    "output": st.lists(st.one_of(tensor_stats, json_values), max_size=3),
    "parameters": st.dictionaries(junk_text, tensor_stats, max_size=2)}))
entry_name = st.one_of(st.sampled_from(["Functional.linear.0.forward", "Functional.gelu.0.forward",
                                        "Module.mlp.MLP.forward.0", "Torch.matmul.0.backward",
                                        "Module.mlp.MLP.parameters_grad.0"]), junk_text)
hostile_dump = st.fixed_dictionaries({"task": st.sampled_from(["statistics", "tensor", "x"]),
                                      "level": st.sampled_from(["mix", "L1", "L0", "debug"]),
                                      "framework": st.just("pytorch"),
                                      "data": st.dictionaries(entry_name, entry_body, max_size=5)})


def _pair(tmp: str, run: bytes, against: bytes = GOOD_DUMP) -> DumpTask:
    paths = []
    for side, data in (("run", run), ("against", against)):
        d = Path(tmp) / side / "step0" / "rank0"
        d.mkdir(parents=True)
        (d / "dump.json").write_bytes(data)
        paths.append(str(d / "dump.json"))
    return DumpTask(paths[0], paths[1])


@bounded(240)
@given(st.one_of(st.binary(max_size=400), st.integers(0, len(GOOD_DUMP)).map(lambda n: GOOD_DUMP[:n]),
                 st.tuples(st.integers(0, len(GOOD_DUMP)), st.binary(min_size=1, max_size=8)).map(
                     lambda t: GOOD_DUMP[:t[0]] + t[1] + GOOD_DUMP[t[0] + len(t[1]):])))
def test_dump_task_on_damaged_bytes(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        report = run_task(_pair(tmp, data))
        assert report.fatal is None or isinstance(report.fatal, str)


@bounded(300)
@given(hostile_dump, hostile_dump)
@example(run={"task": "statistics", "level": "mix", "framework": "pytorch", "data": {
    "Functional.gelu.0.forward": {"output": [{"type": "torch.Tensor", "Norm": [1, 2]}]}}},
    against={"task": "statistics", "level": "mix", "framework": "pytorch", "data": {
        "Functional.gelu.0.forward": {"output": [{"type": "torch.Tensor", "Norm": 1.0}]}}})
def test_dump_task_on_hostile_values(run: dict, against: dict) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        report = run_task(_pair(tmp, dumps(run).encode("utf-8", "surrogatepass"),
                                dumps(against).encode("utf-8", "surrogatepass")))
        assert report.fatal is None or isinstance(report.fatal, str)


@bounded(300)
@given(st.lists(st.lists(st.one_of(numbers_as_text, junk_text, st.sampled_from(
    ["pass", "error", "warning", "N/A", "Functional.linear.0.forward.output.0", "0.5%", "abc%", "[]"])),
    max_size=30), max_size=8), st.booleans())
@example(rows=[["Functional.linear.0.forward.output.0", "x\ry", "pass"]], keep_header=True)
def test_compare_result_reader(rows: list[list[str]], keep_header: bool) -> None:
    header = healthy.COMPARE_HEADER if keep_header else ",".join(["NPU Name", "Result"])
    body = "\n".join(",".join(c.replace("\n", " ") for c in row) for row in rows)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "compare_result_rank0_20250101.csv"
        path.write_text(header + "\n" + body + "\n", encoding="utf-8", errors="surrogatepass")
        try:
            read_compare_result(path, Warnings())
        except PrecdxError:
            pass


@bounded(300)
@given(st.lists(st.lists(st.one_of(numbers_as_text, junk_text), min_size=1, max_size=10), max_size=8))
@example(rows=[["0", "embedding.word_embeddings.weight", "inf", "-0.02", "0.02", "0.0", "0.47", "0", "[2]", "f"]])
def test_monitor_reader(rows: list[list[str]]) -> None:
    body = "\n".join(",".join(c.replace("\n", " ").replace(",", ";") for c in row) for row in rows)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "grad_reduced_0-9.csv"
        path.write_text(healthy.MONITOR_HEADER + "\n" + body + "\n", encoding="utf-8", errors="surrogatepass")
        try:
            read_monitor_csv(path, {}, Warnings())
        except PrecdxError:
            pass
