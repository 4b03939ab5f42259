"""The HTML report: one self-contained file (inline CSS, plot as base64 PNG, no script, no
external resource), escaped, bilingual; rendered in headless Chromium it is not blank."""
from __future__ import annotations

import base64
import glob
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from precdx.diagnosis import diagnose
from precdx.facts import FactSet, parse_fact
from precdx.render import render
from precdx.render.html import render_html

PACK = Path(__file__).parent / "planner" / "consult_pack.yaml"
HOSTILE = "<script>alert(1)</script>"


def _diag(lang: str = "en"):
    facts = FactSet([
        parse_fact({"type": "config_diff", "pair": "target~baseline", "role": "target", "ref_role": "baseline",
                    "name": "lr", "category": "hyperparameter", "baseline": "0.0003", "target": HOSTILE,
                    "presence": "both", "relevant": True, "source": "target/pretrain_gpt.sh"}),
        parse_fact({"type": "observation", "name": "kshift_off_fixes", "value": True}),
    ])
    return diagnose(facts, engine="python", lang=lang, rules_path=str(PACK))


def test_report_holds_verdict_hypotheses_evidence_and_next_steps():
    diag = _diag()
    page = render_html(diag)
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert diag.verdict.upper() in page.upper()
    for h in diag.hypotheses:
        assert h.failure_mode in page
    assert "Align lr and rerun" in page
    assert "rerun a step" in page  # cost label of the step
    assert "No run folders were given" in page  # facts only: no plot, said so


def test_report_is_self_contained_and_escapes_input():
    page = render_html(_diag())
    assert "<script" not in page.lower().replace(HOSTILE.lower().replace("<", "&lt;"), "")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert not re.search(r'<(link|img|iframe|object|embed)[^>]+(href|src)="(https?:)?//', page)
    assert "<style>" in page and "stylesheet" not in page


def test_chinese_report():
    page = render_html(_diag("zh"))
    assert 'lang="zh-CN"' in page and "下一步" in page and "精度不对齐" in page


def test_render_dispatches_html():
    diag = _diag()
    assert render(diag, "html") == render_html(diag)


def _case_with_logs(shared_dir: Path) -> Path:
    for case in sorted((shared_dir / "scenarios").glob("case-*")):
        if (case / "baseline" / "train.log").is_file() and (case / "target" / "train.log").is_file():
            return case
    pytest.skip("no scenario case with baseline and target train.log")


def _series(case: Path):
    from precdx.api import run_series
    from precdx.pipeline import discover

    return run_series(discover(case))


def test_report_embeds_the_loss_plot_as_png(shared_dir):
    pytest.importorskip("precdx.collectors.logs.plot")
    series = _series(_case_with_logs(shared_dir))
    assert {s.role for s in series} >= {"baseline", "target"}
    page = render_html(_diag(), series=series)
    found = re.search(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert found, "no embedded plot"
    assert base64.b64decode(found.group(1))[:8] == b"\x89PNG\r\n\x1a\n"
    assert "No run folders were given" not in page


def test_the_renderer_reads_no_files(shared_dir, monkeypatch):
    """The page is made from the diagnosis and the series the caller read: rendering neither
    discovers the case again nor parses a log."""
    series = _series(_case_with_logs(shared_dir))
    import precdx.collectors.logs.runs as runs
    import precdx.discovery as discovery

    def refuse(*_a, **_k):
        raise AssertionError("the HTML renderer read the runs itself")

    for module, name in ((discovery, "discover_folder"), (discovery, "discover_runs"), (runs, "load_run_series")):
        monkeypatch.setattr(module, name, refuse)
    assert "data:image/png;base64," in render_html(_diag(), series=series)


def test_cli_html_report_plots_the_case_it_diagnosed(shared_dir, tmp_path):
    from click.testing import CliRunner

    from precdx.cli import main

    out = tmp_path / "report.html"
    res = CliRunner().invoke(main, ["diagnose", str(_case_with_logs(shared_dir)), "--format", "html",
                                    "--engine", "python", "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert "data:image/png;base64," in out.read_text(encoding="utf-8")


def test_missing_plot_module_is_a_note_not_a_failure(shared_dir, monkeypatch):
    series = _series(_case_with_logs(shared_dir))
    monkeypatch.setitem(sys.modules, "precdx.collectors.logs.plot", None)  # import now fails
    page = render_html(_diag(), series=series)
    assert "Plot unavailable" in page and "data:image/png" not in page


def test_runs_without_a_curve_are_a_note():
    assert "Plot unavailable: no training curve to plot" in render_html(_diag(), series=[])
    assert "无法生成曲线图" in render_html(_diag("zh"), series=[])


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return next(iter(glob.glob("/usr/lib/chromium/chromium")), None)


def test_report_renders_in_headless_chromium_and_is_not_blank(tmp_path, shared_dir):
    chromium = _chromium()
    if chromium is None:
        pytest.skip("chromium not installed (apt-get install -y chromium)")
    from PIL import Image

    case = _case_with_logs(shared_dir)
    report = tmp_path / "report.html"
    report.write_text(render_html(_diag(), series=_series(case)), encoding="utf-8")
    shot = tmp_path / "shot.png"
    log = tmp_path / "chromium.log"
    # output to a file, not a pipe: chromium's helper processes keep a pipe open after it exits
    with log.open("w") as sink:
        proc = subprocess.run(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
             f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1200,1600", f"--screenshot={shot}",
             report.as_uri()],
            stdin=subprocess.DEVNULL, stdout=sink, stderr=sink, timeout=90)
    assert shot.is_file(), f"no screenshot (exit {proc.returncode}): {log.read_text()[-500:]}"
    image = Image.open(shot).convert("RGB")
    assert image.size == (1200, 1600)
    small = image.resize((300, 400))
    pixels = [tuple(int(c) for c in p) for p in np.asarray(small).reshape(-1, 3)]
    background = Counter(pixels).most_common(1)[0][0]
    share_other = sum(1 for p in pixels if sum(abs(a - b) for a, b in zip(p, background)) > 30) / len(pixels)
    assert share_other > 0.05, "the page rendered (almost) blank"
    assert len(set(pixels)) > 50
    # the verdict bar is drawn in the misaligned red (#cf222e)
    assert any(abs(r - 0xCF) < 25 and abs(g - 0x22) < 25 and abs(b - 0x2E) < 25 for r, g, b in pixels)
