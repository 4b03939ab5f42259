"""Every example line of shared/log-formats.md parses to the values it shows. Lines are read from
the document in place and found by a distinctive fragment; the values are re-read by hand here."""
from __future__ import annotations

import math
from pathlib import Path

import pytest

from precdx.collectors.logs.formats.megatron import record_from_line
from precdx.collectors.logs.model import Event, Record
from precdx.collectors.logs.reader import parse_lines

NAN = math.nan

# fragment -> (framework, expected record fields) ; None for fields the line does not print
RECORDS = {
    "iteration        5/     100": ("megatron", dict(step=5, loss=13.4424, lr=4.134e-07, loss_scale=1.0,
                                                     grad_norm=2.87, skipped=0, nan_iters=0,
                                                     extra={"seq_load_balancing_loss": 1.000203})),
    "iteration     6502/  159576": ("megatron", dict(step=6502, loss=3.876781, lr=5.997e-05, loss_scale=4096.0,
                                                     grad_norm=3246.595, skipped=0, nan_iters=0)),
    "iteration     3385/    8000": ("megatron", dict(step=3385, loss=None, loss_missing=True, lr=6.676e-06,
                                                     loss_scale=1.0, grad_norm=None)),
    "iteration        3/    1000": ("megatron", dict(step=3, loss=1.303225, lr=2.5e-07, loss_scale=1.0,
                                                     grad_norm=9.847, skipped=0, nan_iters=0)),
    "iteration        1/    2000": ("megatron", dict(step=1, loss=3.316887, lr=1.666667e-07, grad_norm=70.959,
                                                     loss_scale=None)),
    "step=10, skipped=4": ("deepspeed", dict(step=10, skipped=4, lr=4.99804827338393e-05, loss=None)),
    "{'loss': 1.3736": ("hf_trainer", dict(step=None, loss=1.3736, grad_norm=3.4177560806274414, lr=0.0001,
                                            extra={"epoch": 1.0})),
    "step:  1  loss:  8.0277": ("torchtitan", dict(step=1, loss=8.0277, grad_norm=1.4604)),
    "Training epoch 0, iteration 28/99": ("nemo2", dict(step=28, loss=2.778, lr=5.6e-06,
                                                        extra={"val_loss": 2.861})),
    "40/40 [00:31<00:00": ("nemo_bar", dict(step=39.0, loss=10.90, extra={"loss_smoothed": 10.9})),
    "3/62 [02:59<58:44": ("nemo_bar", dict(step=1.0, loss=6.930, lr=2.73e-5, grad_norm=8.6)),
}
OVERFLOWS = {
    "Attempted loss scale: 4294967296, reducing to": dict(attempted=4294967296.0, reduced_to=2147483648.0,
                                                          hysteresis_to=None),
    "but hysteresis is 2": dict(attempted=4294967296.0, reduced_to=None, hysteresis_to=1),
    "Overflow detected. Skipping step. Attempted loss scale: 8192.0": dict(attempted=8192.0, reduced_to=4096.0),
}
NO_RECORD = ["train_runtime", "epoch=0/micro_step=40/global_step=10"]


def _doc_lines(shared_dir: Path) -> list[str]:
    text = (shared_dir / "log-formats.md").read_text()
    out, inside = [], False
    for line in text.splitlines():
        if line.strip().startswith("```"):
            inside = not inside
            continue
        if inside:
            out.append(line[2:] if line.startswith("  ") else line)
    return out


def _line(shared_dir: Path, fragment: str) -> str:
    found = [ln for ln in _doc_lines(shared_dir) if fragment in ln]
    assert len(found) == 1, f"{fragment!r} found {len(found)} times in log-formats.md"
    return found[0]


def _check(rec: Record, framework: str, want: dict) -> None:
    assert rec.framework == framework
    for key, value in want.items():
        got = getattr(rec, key)
        if key == "extra":
            for k, v in value.items():
                assert math.isclose(got[k], v, rel_tol=1e-9), (k, got)
        elif value is None or isinstance(value, bool):
            assert got == value, (key, got)
        else:
            assert got is not None and math.isclose(got, value, rel_tol=1e-9), (key, got, value)


@pytest.mark.parametrize("fragment", sorted(RECORDS))
def test_doc_record_line(shared_dir: Path, fragment: str) -> None:
    framework, want = RECORDS[fragment]
    recs = [i for i in parse_lines([_line(shared_dir, fragment)]) if isinstance(i, Record)]
    assert len(recs) == 1
    _check(recs[0], framework, want)


@pytest.mark.parametrize("fragment", sorted(OVERFLOWS))
def test_doc_overflow_line(shared_dir: Path, fragment: str) -> None:
    evs = [i for i in parse_lines([_line(shared_dir, fragment)]) if isinstance(i, Event)]
    assert [e.kind for e in evs] == ["overflow"]
    for key, value in OVERFLOWS[fragment].items():
        assert getattr(evs[0], key) == value, key


@pytest.mark.parametrize("fragment", NO_RECORD)
def test_doc_lines_without_records(shared_dir: Path, fragment: str) -> None:
    assert not [i for i in parse_lines([_line(shared_dir, fragment)]) if isinstance(i, Record)]


def test_doc_olmo_multiline_record(shared_dir: Path) -> None:
    lines = _doc_lines(shared_dir)
    start = next(i for i, ln in enumerate(lines) if ln.startswith("[step=10/1000"))
    recs = [i for i in parse_lines(lines[start:start + 5]) if isinstance(i, Record)]
    assert len(recs) == 1
    _check(recs[0], "olmo", dict(step=10, loss=3.4567, grad_norm=1.234, lr=0.0003, skipped=0))


def test_doc_truncated_megatron_line_is_not_a_missing_loss_when_cut_before_the_losses() -> None:
    rec = record_from_line("iteration 7/ 10 | consumed samples: 7 | learning rate: 1.0E-04 | glob", 1)
    assert rec is not None and rec.loss is None and rec.loss_missing is False
