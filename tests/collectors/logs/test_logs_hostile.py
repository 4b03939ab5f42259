"""Hostile log inputs: a crash-truncated log with a NUL-padded tail is parsed as far as it goes;
declared formats whose regex cannot compile (huge repetition, deep nesting) are reported, not
raised; trainer_state numbers beyond float range are overflows, not crashes."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from precdx.collectors.logs.formats.declared import load_declared_formats
from precdx.collectors.logs.formats.hf import read_trainer_state
from precdx.collectors.logs.reader import looks_binary
from precdx.errors import PrecdxError, Warnings

from .conftest import collect, one, two_runs

MEG = (" iteration {s:8d}/     100 | consumed samples: {c:12d} | learning rate: 1.000000E-04 | global batch size:"
       "     8 | lm loss: {l:.6E} | loss scale: 1.0 | grad norm: 1.000 | number of skipped iterations:   0 | "
       "number of nan iterations:   0 |")


def test_nul_padded_tail_is_a_cut_log_not_a_binary_file(tmp_path: Path) -> None:
    lines = [MEG.format(s=s, c=8 * s, l=3.0 - s / 100) for s in range(1, 21)]
    case = two_runs(tmp_path, lines, lines)
    log = tmp_path / "target" / "train.log"
    log.write_bytes(log.read_bytes() + b"\x00" * 4096)
    facts, warnings = collect(case)
    assert one(facts, "loss_series", run="target").n_points == 20
    assert [w["message"] for w in warnings if w.get("path") == str(log)] == [
        "last line has no newline (log cut off or still being written); parsed as far as it goes"]


@pytest.mark.parametrize("head, binary", [
    (b"iteration 1\n" + b"\x00" * 100, False),
    (b"\x00" * 100, True),
    (b"ab\x00cd\n", True),
    (b"text\n" + bytes(range(256)) * 4, True),
])
def test_looks_binary(head: bytes, binary: bool) -> None:
    assert looks_binary(head) is binary


@pytest.mark.parametrize("regex, reason", [
    (r"step=(?P<step>\d{99999999999})", "the repetition number is too large"),
    (r"step=(?P<step>\d+)" + "(" * 3000 + ")" * 3000, "nested too deeply"),
])
def test_uncompilable_declared_regex_is_a_precdx_error(tmp_path: Path, regex: str, reason: str) -> None:
    path = tmp_path / "formats.yaml"
    path.write_text("precdx_log_formats:\n  - name: mine\n    regex: '" + regex + "'\n")
    with pytest.raises(PrecdxError) as info:
        load_declared_formats(path)
    assert f"invalid regex: {reason}" in info.value.message and info.value.line == 3


def test_trainer_state_numbers_beyond_float_range_are_overflows(tmp_path: Path) -> None:
    path = tmp_path / "trainer_state.json"
    history = [{"loss": 2.0, "step": 1}, {"loss": 10 ** 400, "step": 2}, {"loss": -(10 ** 400), "step": 3}]
    path.write_text(json.dumps({"log_history": history}))
    w = Warnings()
    records = read_trainer_state(path, w)
    assert [r.loss for r in records] == [2.0, math.inf, -math.inf] and not list(w)
    path.write_text('{"log_history": ' + "[" * 100_000 + "]" * 100_000 + "}")
    assert read_trainer_state(path, w) == []
    assert [x["message"] for x in w] == ["cannot read trainer_state.json: JSON nested too deeply"]


def test_impossible_step_numbers_are_dropped_and_counted(tmp_path: Path) -> None:
    good = [MEG.format(s=s, c=8 * s, l=3.0 - s / 100) for s in range(1, 11)]
    bad = [MEG.format(s=10 ** 20, c=8, l=2.0),                            # beyond 2^53
           MEG.format(s=1, c=8, l=2.0).replace("iteration        1", "iteration " + "9" * 5000),  # int() refuses
           "[rank0]:[titan] step: " + "9" * 5000 + "  loss:  8.0277  grad_norm:  1.4604  memory:  1.21GiB"]
    case = two_runs(tmp_path, good, good[:5] + bad + good[5:])
    facts, warnings = collect(case)
    assert one(facts, "loss_series", run="target").n_points == 10
    log = str(tmp_path / "target" / "train.log")
    assert [w["message"] for w in warnings if w.get("path") == log] == [
        "1 iteration line(s) with an impossible step number (NaN, Inf or beyond 2^53) were ignored"]
