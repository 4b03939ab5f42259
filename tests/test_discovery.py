"""Run discovery: case layouts, grouped runs, content recognition, ignored files with
reasons, run facts, the inspect view, and clear errors for folders that are not runs."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from precdx.collectors import artefact_kinds
from precdx.collectors.checklist import COLLECTOR as CHECKLIST
from precdx.collectors.checklist.runs import run_facts
from precdx.discovery import discover_case, discover_folder, discover_runs
from precdx.errors import PrecdxError, Warnings
from precdx.inspection import inspect_case, render_inspect_text

ENV = "CUDA_VISIBLE_DEVICES=0\nCUDA_HOME=/usr/local/cuda\nNCCL_DEBUG=WARN\nHOME=/root\n"
NPU_ENV = "ASCEND_RT_VISIBLE_DEVICES=0\nASCEND_HOME_PATH=/usr/local/Ascend\nHCCL_BUFFSIZE=200\nHOME=/x\n"
SCRIPT = "#!/bin/bash\ntorchrun --nproc_per_node 8 pretrain_gpt.py --lr 1e-4 --seed 1\n"
DECLARED = {k.kind for k in artefact_kinds()} | {"msprobe.config"}  # discovery names msprobe configs itself


def _files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file()}


def _write(root: Path, files: dict[str, str | bytes]) -> None:
    for rel, content in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(content)


def test_every_scenario_case(shared_dir):
    cases = sorted((shared_dir / "scenarios").glob("case-*"))
    assert cases, "no scenario cases found"
    for case_dir in cases:
        expected = yaml.safe_load((case_dir / "expected.yaml").read_text())
        warnings = Warnings()
        case = discover_case(case_dir, warnings=warnings)
        roles = {r.role for r in case.runs}
        assert roles == set(expected["runs"]), case_dir.name
        for run in case.runs:
            kinds = {a.kind for a in run.artefacts}
            assert {"env", "pip"} <= kinds and "config.launch" in kinds, (case_dir.name, run.name, kinds)
            assert kinds <= DECLARED, f"recognised but declared by no collector: {sorted(kinds - DECLARED)}"
            seen = {a.path for a in run.artefacts} | {p for p, _ in run.ignored}
            assert _files(run.root) <= seen, (case_dir.name, run.name)  # every file accounted for
            assert all(why for _, why in run.ignored)
        facts = run_facts(case)
        assert len(facts) == len(case.runs)
        for fact in facts:
            assert fact.device == ("gpu" if fact.role.startswith("baseline") else "npu"), (case_dir.name, fact)
            assert fact.has_config and fact.has_env
        text = render_inspect_text(inspect_case(case))
        assert all(run.name in text for run in case.runs)
        collected = list(CHECKLIST.collect(case, warnings))
        assert not list(warnings), (case_dir.name, list(warnings))
        relevant = {f.name for f in collected if f.type == "config_diff" and f.relevant
                    and f.pair.endswith("~baseline")}
        if expected.get("key"):
            assert expected["key"] in relevant, (case_dir.name, relevant)
        if expected.get("verdict") == "aligned":
            assert not relevant, (case_dir.name, relevant)


def test_grouped_run_has_one_rundir_per_group_with_hosts(tmp_path):
    _write(tmp_path, {
        "baseline/env.txt": ENV, "baseline/pretrain_gpt.sh": SCRIPT,
        "target/pip_freeze.txt": "torch==2.1.0\ntorch-npu==2.1.0\nnumpy==1.26.4\n",
        "target/group00/hosts.txt": "node-a slots=8\nnode-b slots=8\n",
        "target/group00/env.txt": NPU_ENV, "target/group00/pretrain_gpt.sh": SCRIPT,
        "target/group01/hosts.txt": "# hostfile\nnode-c slots=8\n",
        "target/group01/env.txt": NPU_ENV, "target/group01/pretrain_gpt.sh": SCRIPT,
    })
    case = discover_case(tmp_path)
    targets = case.by_role("target")
    assert [(r.name, r.group, r.hosts) for r in targets] == [
        ("target/group00", "group00", ["node-a", "node-b"]), ("target/group01", "group01", ["node-c"])]
    # the listing next to the group folders belongs to every group
    assert all(any(a.kind == "pip" for a in r.artefacts) for r in targets)
    facts = {f.name: f for f in run_facts(case)}
    g = facts["target/group01"]
    assert g.grouped and g.group_count == 2 and g.group == "group01" and g.host_count == 1
    assert g.device == "npu"


def test_recognised_by_content_not_name_and_ignored_with_reasons(tmp_path):
    outside = tmp_path / "elsewhere.txt"
    outside.write_text(ENV)
    _write(tmp_path, {
        "baseline/launch/run.bash": SCRIPT,
        "baseline/dump_of_environment.dat": ENV,
        "baseline/notes.md": "we ran this twice\n",
        "baseline/weights.bin": b"\x00\x01\x02" * 100,
        "baseline/empty.txt": "",
        "target/env.txt": NPU_ENV, "target/x.sh": SCRIPT,
    })
    os.symlink(outside, tmp_path / "baseline" / "link_out.txt")
    case = discover_case(tmp_path)
    base = case.main("baseline")
    kinds = {a.path.name: a.kind for a in base.artefacts}
    assert kinds["run.bash"] == "config.launch" and kinds["dump_of_environment.dat"] == "env"
    reasons = {p.name: why for p, why in base.ignored}
    assert "outside the run folder" in reasons["link_out.txt"]
    assert "binary" in reasons["weights.bin"]
    assert "empty" in reasons["empty.txt"]
    assert "matches no known" in reasons["notes.md"]
    report = inspect_case(case)
    assert {"path": "notes.md", "reason": reasons["notes.md"]} in report["runs"][0]["ignored"]
    text = render_inspect_text(report)
    assert "+ launch/run.bash: config.launch" in text and "- weights.bin: ignored, binary" in text


def test_not_a_case_missing_folder_and_empty_run_are_clear_errors(tmp_path):
    with pytest.raises(PrecdxError, match="does not exist"):
        discover_case(tmp_path / "nope")
    (tmp_path / "f.txt").write_text("x")
    with pytest.raises(PrecdxError, match="not a folder"):
        discover_case(tmp_path / "f.txt")
    (tmp_path / "c0" / "baseline").mkdir(parents=True)
    with pytest.raises(PrecdxError, match="no target/ sub-folder") as err:
        discover_case(tmp_path / "c0")
    assert "baseline" in err.value.hint
    (tmp_path / "c1" / "target").mkdir(parents=True)
    with pytest.raises(PrecdxError, match="target run folder is empty"):
        discover_case(tmp_path / "c1")
    (tmp_path / "c1" / "target" / "env.txt").write_text(ENV)
    # the target alone: read on its own, and said so
    w = Warnings()
    case = discover_case(tmp_path / "c1", warnings=w)
    assert [r.role for r in case.runs] == ["target"]
    assert [i["message"] for i in w.items] == [
        "no baseline/ sub-folder: target/ is diagnosed on its own (add baseline/ to compare the two)"]
    (tmp_path / "c1" / "baseline").mkdir()
    with pytest.raises(PrecdxError, match="baseline run folder is empty"):
        discover_case(tmp_path / "c1")
    with pytest.raises(PrecdxError, match="target run folder does not exist"):
        discover_runs(target=tmp_path / "missing", baseline=tmp_path / "c1" / "target")
    with pytest.raises(PrecdxError, match="same folder"):
        discover_runs(target=tmp_path / "c1" / "target", baseline=tmp_path / "c1" / "target")


def test_discover_runs_names_roles_and_reruns(tmp_path):
    for d in ("a", "b", "c", "d"):
        _write(tmp_path, {f"{d}/env.txt": ENV})
    case = discover_runs(target=tmp_path / "a", baseline=tmp_path / "b",
                         target_reruns=[tmp_path / "c", tmp_path / "d"])
    assert [(r.role, r.name) for r in case.runs] == [
        ("baseline", "baseline"), ("target", "target"), ("target_rerun", "target_rerun"),
        ("target_rerun", "target_rerun2")]
    single = discover_folder(tmp_path / "a")
    assert [(r.role, r.name) for r in single.runs] == [("target", "target")]
