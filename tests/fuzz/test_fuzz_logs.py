"""Property: the log parsers, the streaming reader and the logs collector never raise on any
line or any bytes; numbers they return are floats (NaN/Inf allowed), never strings or huge ints."""
from __future__ import annotations

import pytest

import math
import tempfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from precdx.collectors.base import Case, RunDir
from precdx.collectors.logs import COLLECTOR
from precdx.collectors.logs.formats import builtin_parsers
from precdx.collectors.logs.formats.declared import DeclaredParser, load_declared_formats
from precdx.collectors.logs.formats.hf import read_trainer_state
from precdx.collectors.logs.model import Record, parse_int, parse_num
from precdx.collectors.logs.reader import ReadStats, iter_log, parse_lines
from precdx.collectors.logs.runs import sniff_file
from precdx.collectors.logs.series import SeriesBuilder
from precdx.errors import PrecdxError, Warnings

from .strategies import bounded, dumps, json_values, junk_text, log_lines, numbers_as_text

pytestmark = pytest.mark.slow  # trains, dumps or fuzzes: outside the fast lane (pytest -m 'not slow')

NUMERIC = ("step", "loss", "grad_norm", "lr", "loss_scale")


@bounded(600)
@given(numbers_as_text)
def test_number_grammar(text: str) -> None:
    value = parse_num(text)
    assert value is None or isinstance(value, float)
    n = parse_int(text)
    assert n is None or isinstance(n, int)


@bounded(300)
@given(log_lines)
def test_every_parser_on_hostile_lines(lines: list[str]) -> None:
    """All built-in formats at once, as the reader dispatches lines to them."""
    for item in parse_lines(lines, builtin_parsers()):
        if isinstance(item, Record):
            for name in NUMERIC:
                value = getattr(item, name)
                assert value is None or isinstance(value, (int, float)) and not isinstance(value, bool), (name, value)


@bounded(200)
@given(log_lines, st.binary(max_size=300), st.sampled_from(["\n", "\r\n", ""]))
def test_reader_and_series_on_text_with_garbage(lines: list[str], garbage: bytes, newline: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "train.log"
        data = newline.join(lines).encode("utf-8", "surrogatepass")
        cut = len(data) // 2
        path.write_bytes(data[:cut] + garbage + data[cut:])
        stats = ReadStats(str(path))
        builder = SeriesBuilder("run", "target")
        for item in iter_log(path, stats):
            builder.add(item)
        builder.build()
        sniff_file(path, path.read_bytes()[:65536])


@bounded(120)
@given(log_lines, log_lines, st.binary(max_size=200))
def test_logs_collector_end_to_end(baseline: list[str], target: list[str], garbage: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        runs = []
        for role, lines in (("baseline", baseline), ("target", target)):
            (root / role).mkdir()
            (root / role / "train.log").write_bytes("\n".join(lines).encode("utf-8", "surrogatepass") + garbage)
            runs.append(RunDir(role=role, name=role, root=root / role))
        warnings = Warnings()
        facts = list(COLLECTOR.collect(Case(runs=runs, root=root), warnings))
        for fact in facts:
            fact.to_json()


@bounded(200)
@given(st.one_of(json_values, st.fixed_dictionaries({"log_history": st.lists(
    st.dictionaries(st.sampled_from(["loss", "step", "grad_norm", "learning_rate", "epoch", "eval_loss"]),
                    json_values, max_size=5), max_size=8)})))
def test_trainer_state_reader(doc) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trainer_state.json"
        path.write_text(dumps(doc), encoding="utf-8", errors="surrogatepass")
        for rec in read_trainer_state(path, Warnings()):
            assert rec.loss is None or isinstance(rec.loss, float)


@bounded(200)
@given(st.lists(st.fixed_dictionaries({"name": junk_text, "regex": st.one_of(
    junk_text, st.sampled_from([r"step=(?P<step>\S+) loss=(?P<loss>\S+)", r"(?P<step>\d+)(?P<x>.*)",
                                r"(?P<step>", r"a{99999999999}(?P<step>1)", "(" * 300 + ")" * 300])),
}, optional={"kind": junk_text, "contains": json_values, "windowed": json_values}), max_size=3),
    log_lines)
def test_declared_formats(entries: list, lines: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "formats.yaml"
        path.write_text(dumps({"precdx_log_formats": entries}), encoding="utf-8", errors="surrogatepass")
        try:
            formats = load_declared_formats(path)
        except PrecdxError:
            return
        builder = SeriesBuilder("run", "target")
        for item in parse_lines(lines[:10], [DeclaredParser(f) for f in formats]):
            builder.add(item)
        series = builder.build()
        assert series is None or all(math.isfinite(s) for s in series.steps.tolist())
