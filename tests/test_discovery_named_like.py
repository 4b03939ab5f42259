"""Discovery speaks up about files named like a run artefact whose content is not one (a
garbled env.txt, a compare_result CSV without its header) instead of ignoring them silently;
a 'host name' longer than DNS allows is junk, not a host."""
from __future__ import annotations

from pathlib import Path

from precdx.discovery import discover_runs
from precdx.errors import Warnings

LOG = " iteration        1/     100 | lm loss: 2.500000E+00 | loss scale: 1.0 | grad norm: 1.000 |\n"


def _run(tmp_path: Path, files: dict[str, str | bytes]) -> Warnings:
    root = tmp_path / "target"
    for rel, content in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(content if isinstance(content, bytes) else content.encode())
    warnings = Warnings()
    discover_runs(target=root, warnings=warnings)
    return warnings


def test_well_known_names_with_foreign_content_are_warned(tmp_path: Path) -> None:
    warnings = _run(tmp_path, {"train.log": LOG, "env.txt": "not an environment\nlisting at all\n",
                               "pip_freeze.txt": "numpy\ntorch\n", "eval.json": '{"eval_loss": "low"}',
                               "msprobe_compare/step0/compare_result_rank0_1.csv": "Name,Result\nx,pass\n",
                               "notes.txt": "free text nobody asked about\n"})
    said = {Path(w["path"]).name: w["message"] for w in warnings}
    assert said["env.txt"] == ("named like an environment listing, but its content is not recognised as one "
                               "(text file whose content matches no known artefact format); ignored")
    assert said["pip_freeze.txt"].startswith("named like a pip listing")
    assert said["eval.json"].startswith("named like an evaluation result")
    assert said["compare_result_rank0_1.csv"].startswith("named like an msprobe compare result")
    assert "notes.txt" not in said and "train.log" not in said


def test_overlong_host_names_are_junk_lines(tmp_path: Path) -> None:
    warnings = _run(tmp_path, {"train.log": LOG, "hosts.txt": "node-1 slots=8\n" + "x" * 300 + "\nnode-2:8\n"})
    assert [(w["message"], w.get("line")) for w in warnings] == [("hostfile line is not 'HOST slots=N'; skipped", 2)]
