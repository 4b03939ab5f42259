"""Bad input never crashes the collector: empty, unrecognised, binary, truncated, mixed-format
and unreadable files give warnings naming the file; other runs still produce facts."""
from __future__ import annotations

import json
from pathlib import Path

from precdx.collectors.base import Case, RunDir

MEG = (" iteration {s:8d}/     100 | consumed samples: {c:12d} | learning rate: 1.000000E-04 | global batch size:"
       "     8 | lm loss: {l:.6E} | loss scale: 1.0 | grad norm: 1.000 | number of skipped iterations:   0 | "
       "number of nan iterations:   0 |")


def _meg(n: int = 20, base: float = 3.0) -> list[str]:
    return [MEG.format(s=s, c=8 * s, l=base - s / 1000) for s in range(1, n + 1)]


def _case(tmp: Path, target_bytes: bytes, name: str = "train.log") -> Case:
    (tmp / "baseline").mkdir()
    (tmp / "baseline" / "train.log").write_text("\n".join(_meg()) + "\n")
    (tmp / "target").mkdir(exist_ok=True)
    (tmp / "target" / name).write_bytes(target_bytes)
    return Case(runs=[RunDir(role="baseline", name="baseline", root=tmp / "baseline"),
                      RunDir(role="target", name="target", root=tmp / "target")], root=tmp)


def _messages(warnings) -> str:
    return " | ".join(f"{w.get('path')}: {w['message']}" for w in warnings)


def test_empty_log(tmp_path: Path, kit) -> None:
    facts, w = kit.collect(_case(tmp_path, b""))
    assert "train.log: empty log file" in _messages(w) and "no usable training log for run 'target'" in _messages(w)
    assert kit.one(facts, "loss_series", run="baseline").n_points == 20


def test_no_recognised_lines(tmp_path: Path, kit) -> None:
    facts, w = kit.collect(_case(tmp_path, b"hello\nworld\n"))
    text = _messages(w)
    assert "train.log: no training-iteration lines" in text
    assert not [f for f in facts if f.type == "loss_compare"]


def test_binary_file(tmp_path: Path, kit) -> None:
    _, w = kit.collect(_case(tmp_path, bytes(range(256)) * 64))
    assert "binary content" in _messages(w)


def test_truncated_last_line_is_parsed_and_warned(tmp_path: Path, kit) -> None:
    lines = _meg(10)
    data = ("\n".join(lines[:-1]) + "\n" + lines[-1][:120]).encode()
    facts, w = kit.collect(_case(tmp_path, data))
    assert "last line has no newline" in _messages(w)
    series = kit.one(facts, "loss_series", run="target")
    assert series.last_step == 10 and series.nan_count == 0  # cut before the losses: not a NaN


def test_mixed_formats_warn_and_use_the_most_frequent(tmp_path: Path, kit) -> None:
    hf = [f"{{'loss': {2.5 - i / 100}, 'grad_norm': 1.0, 'learning_rate': 0.0001, 'epoch': 0.1}}" for i in range(8)]
    facts, w = kit.collect(_case(tmp_path, ("\n".join(_meg(20) + hf) + "\n").encode()))
    assert "mixed log formats" in _messages(w)
    assert kit.one(facts, "loss_series", run="target").framework == "megatron"


def test_garbage_bytes_inside_a_text_log(tmp_path: Path, kit) -> None:
    lines = _meg(10)
    data = ("\n".join(lines[:5]) + "\n").encode() + b"\xff\xfe garbage \xc3\x28\n" + \
        ("\n".join(lines[5:]) + "\n").encode()
    facts, w = kit.collect(_case(tmp_path, data))
    assert not list(w)
    assert kit.one(facts, "loss_series", run="target").n_points == 10


def test_broken_trainer_state(tmp_path: Path, kit) -> None:
    d = tmp_path / "target" / "output" / "checkpoint-10"
    d.mkdir(parents=True)
    (d / "trainer_state.json").write_text('{"log_history": [{"loss": 1.0, "step": 1}, ')
    facts, w = kit.collect(_case(tmp_path, b"", name="unused.txt"))
    assert "trainer_state.json: cannot read trainer_state.json" in _messages(w)


def test_trainer_state_nan_values(tmp_path: Path, kit) -> None:
    d = tmp_path / "target" / "output" / "checkpoint-3"
    d.mkdir(parents=True)
    history = [{"epoch": 0.1 * s, "grad_norm": "NaN" if s == 2 else 1.0, "learning_rate": 1e-4, "loss": 2.0, "step": s}
               for s in (1, 2, 3)]
    (d / "trainer_state.json").write_text(json.dumps({"log_history": history}).replace('"NaN"', "NaN"))
    facts, w = kit.collect(_case(tmp_path, b"", name="unused.txt"))
    series = kit.one(facts, "loss_series", run="target")
    assert series.framework == "hf_trainer_state" and series.nan_count == 1 and series.first_nan_step == 2


def test_missing_run_folder(tmp_path: Path, kit) -> None:
    case = Case(runs=[RunDir(role="target", name="target", root=tmp_path / "nope")], root=tmp_path)
    facts, w = kit.collect(case)
    assert facts == []


def test_overlong_line_and_crlf(tmp_path: Path, kit) -> None:
    lines = _meg(6)
    data = b"x" * (3 * 1024 * 1024) + b"\n" + ("\r\n".join(lines) + "\r\n").encode()
    facts, w = kit.collect(_case(tmp_path, data))
    assert "longer than 1 MiB were cut" in _messages(w)
    assert kit.one(facts, "loss_series", run="target").n_points == 6
