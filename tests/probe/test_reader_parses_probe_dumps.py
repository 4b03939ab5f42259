"""The msprobe reader in engine/collectors/msprobe parses what the probe writes, unchanged."""
from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from precdx.probe import Probe  # noqa: E402
from tests.probe.tiny_models import TinyLM, make_step  # noqa: E402

dumpdir = pytest.importorskip("precdx.collectors.msprobe.dumpdir",
                              reason="precdx.collectors.msprobe (the msprobe reader) is not there yet")


@pytest.mark.parametrize("mode", ["statistics", "md5"])
def test_reader_parses_probe_dump(tmp_path, mode):
    torch.manual_seed(0)
    model = TinyLM()
    probe = Probe(model, tmp_path, summary_mode=mode)
    with probe.capture():
        make_step(model)()
    path = tmp_path / "step0" / "rank0" / "dump.json"
    located = dumpdir.locate(path)
    assert (located.step, located.rank) == (0, 0)
    header = dumpdir.read_header(path)
    assert (header.task, header.level, header.framework) == ("statistics", "mix", "pytorch")
    entries = list(dumpdir.iter_entries(path))
    raw = json.loads(path.read_text())["data"]
    assert len(entries) == len(raw)
    gelu = next(e for e in entries if e.order == list(raw).index("Functional.gelu.0.forward"))
    out = [t for t in gelu.outputs if t.kind == "tensor"][0]
    assert out.max == pytest.approx(raw["Functional.gelu.0.forward"]["output"][0]["Max"])
    if mode == "md5":
        assert out.md5 == raw["Functional.gelu.0.forward"]["output"][0]["md5"]
