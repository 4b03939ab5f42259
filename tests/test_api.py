"""One diagnose API (precdx.api): the CLI, the HTTP service and the MCP server diagnose a case
through `diagnose_case` and answer the same; declared changes reach every interface; the series
for the HTML plot come with the diagnosis."""
from __future__ import annotations

import io
import json
import shutil
import warnings as _warnings
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from precdx.api import diagnose_case, gather
from precdx.cli import main
from precdx.errors import PrecdxError, Warnings


def _case(shared_dir: Path) -> Path:
    for case in sorted((shared_dir / "scenarios").glob("case-*")):
        if (case / "baseline" / "train.log").is_file() and (case / "target" / "train.log").is_file():
            return case
    pytest.skip("no scenario case with baseline and target train.log")


def _ranked(body: dict) -> list[tuple[str, float]]:
    return [(h["failure_mode"], h["score"]) for h in body["hypotheses"]]


def test_cli_and_api_answer_the_same(shared_dir):
    case = _case(shared_dir)
    result = diagnose_case(case, engine="python")
    res = CliRunner().invoke(main, ["diagnose", str(case), "--format", "json", "--engine", "python"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output) == json.loads(result.diagnosis.model_dump_json())
    assert result.case is not None and {r.role for r in result.case.runs} >= {"baseline", "target"}
    assert result.series is None  # only when asked for


def test_service_and_mcp_answer_as_the_api(shared_dir, tmp_path):
    from precdx.mcp.server import diagnose_case as mcp_diagnose
    from precdx.service.app import create_app
    from precdx.service.settings import Settings

    with _warnings.catch_warnings():
        _warnings.simplefilter("ignore")
        from fastapi.testclient import TestClient

    case = _case(shared_dir)
    expected = _ranked(json.loads(diagnose_case(case).diagnosis.model_dump_json()))
    assert _ranked(mcp_diagnose(str(case))) == expected
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for p in sorted(case.rglob("*")):
            if p.is_file():
                zf.write(p, p.relative_to(case.parent))
    settings = Settings(db_url=f"sqlite:///{tmp_path / 's.db'}", engine="durable")
    with TestClient(create_app(settings)) as client:
        r = client.post("/v1/diagnose", content=buf.getvalue(), headers={"content-type": "application/zip"})
    assert r.status_code == 200, r.text
    assert _ranked(r.json()) == expected


def test_series_come_with_the_diagnosis(shared_dir):
    result = diagnose_case(_case(shared_dir), engine="python", series=True)
    assert result.series and {s.role for s in result.series} >= {"baseline", "target"}
    assert all(len(s) for s in result.series)
    assert diagnose_case(facts=list(result.facts)[:3], engine="python", series=True).series is None


def test_declared_changes_from_case_yaml_and_options(shared_dir, tmp_path):
    case = tmp_path / "case"
    shutil.copytree(_case(shared_dir), case)
    (case / "case.yaml").write_text("changed: [context-parallel-size]\n")
    got = gather(case, changed=["--zero-stage"], warnings=Warnings())
    declared = [f for f in got.facts if f.type == "declared_change"]
    assert sorted(f.name for f in declared) == ["context_parallel_size", "zero_stage"]
    assert got.case is not None and got.case.root == case


def test_a_broken_case_yaml_is_a_warning(shared_dir, tmp_path):
    case = tmp_path / "case"
    shutil.copytree(_case(shared_dir), case)
    (case / "case.yaml").write_text("changed: {zero: [\n")
    warnings = Warnings()
    got = gather(case, warnings=warnings)
    assert not [f for f in got.facts if f.type == "declared_change"]
    assert any(w["message"].startswith("case.yaml not read") for w in warnings)


def test_given_facts_may_not_contradict_collected_ones(shared_dir):
    case = _case(shared_dir)
    run = next(f for f in gather(case).facts if f.type == "run" and f.role == "target")
    clash = run.model_copy(update={"device": "cpu" if run.device != "cpu" else "gpu"})
    with pytest.raises(PrecdxError, match="contradict"):
        gather(case, facts=[clash])
