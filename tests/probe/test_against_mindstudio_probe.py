"""Same model, same inputs: the probe's dump equals mindstudio-probe's own (names, order,
statistics, construct.json, stack groups). Skipped when mindstudio-probe is not installed."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # trains, dumps or fuzzes: outside the fast lane (pytest -m 'not slow')

pytest.importorskip("torch")
pytest.importorskip("msprobe", reason="mindstudio-probe is not installed in this environment")

REPO = Path(__file__).resolve().parents[2]

DRIVER = textwrap.dedent("""
    import json, sys, torch
    sys.path.insert(0, {repo!r})
    from tests.probe.tiny_models import TinyLM, make_step
    torch.manual_seed(0)
    model = TinyLM()
    step = make_step(model)
    out = sys.argv[2]
    if sys.argv[1] == "msprobe":
        from msprobe.pytorch import PrecisionDebugger
        cfg = {{"task": "statistics", "dump_path": out, "rank": [], "step": [], "level": "mix",
               "async_dump": False, "extra_info": True,
               "statistics": {{"scope": [], "list": [], "data_mode": ["all"],
                              "summary_mode": "statistics", "tensor_list": []}}}}
        json.dump(cfg, open(out + ".json", "w"))
        dbg = PrecisionDebugger(config_path=out + ".json")
        dbg.start(model); step(); dbg.stop(); dbg.step()
    else:
        from precdx.probe import Probe
        probe = Probe(model, out, rank=None)
        with probe.capture():
            step()
""")


def _run(tool: str, out: Path) -> Path:
    subprocess.run([sys.executable, "-c", DRIVER.format(repo=str(REPO)), tool, str(out)],
                   check=True, capture_output=True, cwd=str(out.parent))
    return next(out.glob("step0/*/"))


def _close(a, b) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        return a == pytest.approx(b, rel=1e-5, abs=1e-8, nan_ok=True)
    return a == b


def test_probe_dump_equals_mindstudio_probe(tmp_path):
    theirs = _run("msprobe", tmp_path / "theirs")
    ours = _run("probe", tmp_path / "ours")
    a = json.loads((theirs / "dump.json").read_text())
    b = json.loads((ours / "dump.json").read_text())
    assert list(a["data"]) == list(b["data"])
    bad = [k for k in a["data"] if not _close(a["data"][k], b["data"][k])]
    assert not bad
    assert json.loads((theirs / "construct.json").read_text()) == json.loads((ours / "construct.json").read_text())
    sa = json.loads((theirs / "stack.json").read_text())
    sb = json.loads((ours / "stack.json").read_text())
    assert [v[0] for v in sa.values()] == [v[0] for v in sb.values()]
    assert [v[1][0] for v in sa.values()] == [v[1][0] for v in sb.values()]
