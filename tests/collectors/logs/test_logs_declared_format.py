"""User-declared log formats: the YAML shape, its errors (file:line), and its use on a run."""
from __future__ import annotations

from pathlib import Path

import pytest

from precdx.collectors.base import Case, RunDir
from precdx.collectors.logs.formats.declared import load_declared_formats
from precdx.errors import PrecdxError

GOOD = """\
precdx_log_formats:
  - name: mytrainer
    contains: "train_step="
    regex: 'train_step=(?P<step>\\d+) loss=(?P<loss>\\S+)(?: gnorm=(?P<grad_norm>\\S+))? ep=(?P<epoch>\\S+)'
"""


def test_declared_format_drives_a_run(tmp_path: Path, kit) -> None:
    (tmp_path / "formats.yaml").write_text(GOOD)
    for role, offset in (("baseline", 0.0), ("target", 0.05)):
        d = tmp_path / role
        d.mkdir()
        lines = [f"12:00 train_step={s} loss={2.0 - s / 100 + offset:.4f} gnorm=1.5 ep=0.{s}" for s in range(1, 31)]
        lines[9] = "12:00 train_step=10 loss=nan gnorm=nan ep=0.1" if role == "target" else lines[9]
        (d / "run.log").write_text("\n".join(lines) + "\n")
    case = Case(runs=[RunDir(role="baseline", name="baseline", root=tmp_path / "baseline"),
                      RunDir(role="target", name="target", root=tmp_path / "target")], root=tmp_path)
    facts, w = kit.collect(case)
    assert not list(w)
    series = kit.one(facts, "loss_series", run="target")
    assert series.framework == "mytrainer" and series.n_points == 30 and series.first_nan_step == 10
    assert kit.one(facts, "loss_compare", run="target").first_step_rel_err == pytest.approx(0.05 / 1.99, rel=1e-3)


@pytest.mark.parametrize("text, message, line", [
    ("precdx_log_formats: []\n", "non-empty list", 1),
    ("precdx_log_formats:\n  - name: x\n    regex: 'it (\\d+)'\n", "named group for the step or a value", 3),
    ("precdx_log_formats:\n  - name: x\n    regex: '(?P<step>['\n", "invalid regex", 3),
    ("precdx_log_formats:\n  - name: x\n    regex: '(?P<step>\\d+)'\n    colour: red\n", "unknown key", 2),
    ("precdx_log_formats:\n  - name: x\n    name: y\n", "duplicate key", 3),
    ("other: 1\n", "not a log-format file", None),
    ("precdx_log_formats:\n  - name: x\n    regex: 'it (?P<step>\\d+) (\\w+\\s?)+$'\n", "exponential time", 3),
])
def test_declared_format_errors(tmp_path: Path, text: str, message: str, line: int | None) -> None:
    p = tmp_path / "f.yaml"
    p.write_text(text)
    with pytest.raises(PrecdxError) as exc:
        load_declared_formats(p)
    assert message in exc.value.message and exc.value.path == str(p) and exc.value.line == line


def test_broken_declared_format_is_a_warning_not_a_crash(tmp_path: Path, kit) -> None:
    (tmp_path / "formats.yaml").write_text("precdx_log_formats:\n  - name: x\n")
    d = tmp_path / "target"
    d.mkdir()
    (d / "train.log").write_text("step:  1  loss:  8.0277  grad_norm:  1.4604  memory:  1.21GiB(0.86%)\n")
    facts, w = kit.collect(Case(runs=[RunDir(role="target", name="target", root=d)], root=tmp_path))
    assert any("log format file ignored" in x["message"] for x in w)
    assert kit.one(facts, "loss_series", run="target").framework == "torchtitan"


@pytest.mark.parametrize("pattern", [r"it (?P<step>\d+) (\d+,)* loss (?P<loss>\S+)", r"(?P<step>\d+) (\d+\.)+"])
def test_declared_format_separated_repeats_are_allowed(tmp_path: Path, pattern: str) -> None:
    p = tmp_path / "f.yaml"
    p.write_text(f"precdx_log_formats:\n  - name: x\n    regex: '{pattern}'\n")
    assert load_declared_formats(p)
