"""`precdx mcp` end to end: the server runs as a subprocess (the CLI entry point) and the MCP
SDK's own stdio client lists and calls its tools and reads its resources."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from tests.cli.test_cli_edges import megatron_log, write

pytestmark = pytest.mark.slow  # starts `precdx mcp` as a subprocess: outside the fast lane (pytest -m 'not slow')

mcp = pytest.importorskip("mcp", reason="the MCP server needs the optional extra 'mcp'")
anyio = pytest.importorskip("anyio")

REPO = Path(__file__).resolve().parents[2]


def _params():
    from mcp.client.stdio import StdioServerParameters

    env = dict(os.environ, PYTHONPATH=str(REPO))
    return StdioServerParameters(command=sys.executable, args=[str(REPO / "cli.py"), "mcp"], env=env, cwd=str(REPO))


def _session(coro_fn):
    """Run `coro_fn(client)` against a fresh server process."""
    from mcp import Client

    async def main():
        async with Client(_params(), read_timeout_seconds=300) as client:
            return await coro_fn(client)
    return anyio.run(main)


def _text(result) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


def _payload(result):
    if result.structured_content is not None:
        sc = result.structured_content
        return sc["result"] if isinstance(sc, dict) and set(sc) == {"result"} else sc
    return json.loads(_text(result))


def test_mcp_server_end_to_end_over_stdio(tmp_path):
    case = tmp_path / "case"
    write(case / "baseline" / "train.log", megatron_log())
    write(case / "target" / "train.log", megatron_log(drift=0.004))

    async def scenario(client):
        out = {}
        tools = await client.list_tools()
        out["tools"] = sorted(t.name for t in tools.tools)
        out["diagnose_case"] = await client.call_tool("diagnose_case", {"case_dir": str(case)})
        out["by_files"] = await client.call_tool("diagnose_case", {
            "target": str(case / "target" / "train.log"), "baseline": str(case / "baseline" / "train.log")})
        out["missing"] = await client.call_tool("diagnose_case", {"case_dir": str(tmp_path / "nope")})
        out["explain"] = await client.call_tool("explain", {"name": "cfg-001", "lang": "zh"})
        out["modes"] = await client.call_tool("list_failure_modes", {"area": "operator"})
        out["next"] = await client.call_tool("next_evidence", {"case_dir": str(case), "limit": 3})
        resources = await client.list_resources()
        out["resources"] = [str(r.uri) for r in resources.resources]
        out["kb"] = await client.read_resource("precdx://kb/operator.precision_defect")
        out["catalogue"] = await client.read_resource("precdx://failure-modes")
        return out

    out = _session(scenario)
    assert out["tools"] == ["diagnose_case", "diagnose_facts", "explain", "list_failure_modes", "next_evidence"]

    diag = _payload(out["diagnose_case"])
    assert not out["diagnose_case"].is_error
    assert diag["verdict"] == "misaligned" and diag["hypotheses"]
    assert {f["type"] for f in diag["facts"]} >= {"loss_series", "loss_compare"}
    assert _payload(out["by_files"])["verdict"] == "misaligned"

    assert out["missing"].is_error and "case folder does not exist" in _text(out["missing"])

    exp = _payload(out["explain"])
    assert exp["id"] == "CFG-001" and "CFG-001" in exp["text"]

    modes = _payload(out["modes"])
    assert modes and all(m["area"] == "operator" for m in modes)
    assert "operator.precision_defect" in {m["id"] for m in modes}

    nxt = _payload(out["next"])
    assert nxt["verdict"] == "misaligned" and 0 < len(nxt["suggestions"]) <= 3
    assert all({"kind", "text", "cost", "gain"} <= set(s) for s in nxt["suggestions"])

    assert "precdx://kb/operator.precision_defect" in out["resources"]
    assert "precdx://failure-modes" in out["resources"]
    kb_text = out["kb"].contents[0].text
    assert kb_text.startswith("# operator.precision_defect") and "## Mitigation" in kb_text and "## 缓解" in kb_text
    assert any(m["id"] == "operator.precision_defect" for m in json.loads(out["catalogue"].contents[0].text))


def test_mcp_diagnose_facts_matches_the_cli(tmp_path):
    from click.testing import CliRunner

    from precdx.cli import main

    case = tmp_path / "case"
    write(case / "baseline" / "train.log", megatron_log())
    write(case / "target" / "train.log", megatron_log(drift=0.004))
    facts = json.loads(CliRunner().invoke(main, ["facts", str(case), "--format", "json"]).stdout)["facts"]
    cli = json.loads(CliRunner().invoke(main, ["diagnose", str(case), "--format", "json"]).stdout)

    async def scenario(client):
        good = await client.call_tool("diagnose_facts", {"facts": facts})
        bad = await client.call_tool("diagnose_facts", {"facts": [{"type": "no_such_fact"}]})
        return good, bad

    good, bad = _session(scenario)
    got = _payload(good)
    assert got["verdict"] == cli["verdict"]
    assert [h["failure_mode"] for h in got["hypotheses"]] == [h["failure_mode"] for h in cli["hypotheses"]]
    assert bad.is_error and "no_such_fact" in _text(bad)
