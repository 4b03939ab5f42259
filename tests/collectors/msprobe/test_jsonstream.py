"""The NaN-tolerant streaming reader and the small-file loader."""
from __future__ import annotations

import io
import math

import pytest

from precdx.collectors.msprobe import jsonstream
from precdx.collectors.msprobe.dumpdir import DumpReadError, iter_entries
from precdx.errors import PrecdxError


def _values(raw: bytes) -> dict:
    return {k: jsonstream.denan_tree(v) for k, v in jsonstream.stream_kvitems(io.BytesIO(raw), "data")}


def test_bare_nonfinite_tokens_parse() -> None:
    got = _values(b'{"data": {"a": {"Max": NaN, "Min": -Infinity, "Norm": Infinity, "Mean": 1.5}}}')
    a = got["a"]
    assert math.isnan(a["Max"]) and a["Min"] == -math.inf and a["Norm"] == math.inf and a["Mean"] == 1.5


def test_tokens_split_across_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    # tiny blocks force every token to straddle a read boundary somewhere
    monkeypatch.setattr(jsonstream, "_CHUNK", 5)
    raw = b'{"data": {"x": [NaN, -Infinity, Infinity, 2], "y": {"v": "NaN text"}}}'
    got = _values(raw)
    assert math.isnan(got["x"][0]) and got["x"][1] == -math.inf and got["x"][2] == math.inf
    assert got["y"]["v"] == "NaN text"   # text inside strings is left alone


def test_truncated_dump_yields_prefix_then_error(tmp_path) -> None:
    p = tmp_path / "dump.json"
    p.write_text('{"task": "statistics", "level": "L1", "data": {"Torch.a.0.forward": {"output": []},'
                 ' "Torch.b.0.forward": {"out')
    seen = []
    with pytest.raises(DumpReadError) as exc:
        for e in iter_entries(p):
            seen.append(e.name.full)
    assert seen == ["Torch.a.0.forward"]
    assert exc.value.entries_read == 1


@pytest.mark.parametrize("content, words", [
    (b"", "empty"), (b"\xff\xfe\x00\x01garbage", "not UTF-8"), (b'{"a": [1, 2', "truncated"),
    (b'{"a": ]}', "not valid JSON")])
def test_small_json_errors_name_the_file(tmp_path, content: bytes, words: str) -> None:
    p = tmp_path / "x.json"
    p.write_bytes(content)
    with pytest.raises(PrecdxError) as exc:
        jsonstream.load_small_json(p, what="test json")
    assert words in exc.value.message and exc.value.path == str(p)


def test_missing_small_json_is_a_user_error(tmp_path) -> None:
    with pytest.raises(PrecdxError, match="cannot read"):
        jsonstream.load_small_json(tmp_path / "nope.json", what="test json")
