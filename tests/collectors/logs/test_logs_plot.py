"""The report plot: a PNG of baseline vs target written from a case; nothing to plot is a warning."""
from __future__ import annotations

from pathlib import Path

from precdx.collectors.base import Case, RunDir
from precdx.collectors.logs.plot import plot_curves
from precdx.errors import Warnings


def test_plot_curves_writes_png(scenarios: Path, kit, tmp_path: Path) -> None:
    out = plot_curves(kit.case_from_dir(scenarios / "case-02"), tmp_path / "plots" / "curves.png")
    assert out is not None and out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 10_000


def test_plot_without_curves_warns(tmp_path: Path) -> None:
    w = Warnings()
    case = Case(runs=[RunDir(role="target", name="target", root=tmp_path)], root=tmp_path)
    assert plot_curves(case, tmp_path / "x.png", w) is None
    assert any("no training curve" in x["message"] for x in w)
