"""Collectors declare the artefact kinds they read (engine/collectors/<name>/kinds.py):
every kind discovery recognises in the shared scenarios and msprobe samples is declared by one
collector, discovery's "named like" warnings come from those declarations, and only the
collectors that decompress are shown a compressed file."""
from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from precdx.collectors import all_collectors, artefact_kinds, reads_of
from precdx.discovery import _named_like, discover_folder, discover_runs
from precdx.errors import Warnings

# kinds discovery names itself (files no collector reads but `precdx inspect` should show)
DISCOVERY_OWN = {"msprobe.config"}


def _declared() -> dict[str, str]:
    owner: dict[str, str] = {}
    for collector in all_collectors():
        for kind in reads_of(collector).kinds:
            assert kind.kind not in owner, f"{kind.kind} declared by {owner[kind.kind]} and {collector.name}"
            owner[kind.kind] = collector.name
    return owner


def test_every_collector_declares_what_it_reads():
    assert {c.name for c in all_collectors()} == {"checklist", "logs", "msprobe", "tracking"}
    for collector in all_collectors():
        assert reads_of(collector).kinds, f"{collector.name} declares no artefact kind"
    assert {c.name for c in all_collectors() if reads_of(c).compressed} == {"logs", "tracking"}


@pytest.mark.parametrize("folder", ["msprobe-samples"])  # the scenarios: tests/test_discovery.py
def test_recognised_kinds_are_declared(shared_dir, folder):
    owner = _declared()
    seen: set[str] = set()
    for case in sorted(p for p in (shared_dir / folder).iterdir() if p.is_dir()):
        for run in discover_folder(case, warnings=Warnings()).runs:
            seen |= {a.kind for a in run.artefacts}
    assert seen, f"nothing recognised under {folder}"
    undeclared = sorted(seen - set(owner) - DISCOVERY_OWN)
    assert not undeclared, f"recognised but declared by no collector: {undeclared}"


def test_named_like_comes_from_the_declarations():
    for kind in artefact_kinds():
        for name in kind.names:
            assert _named_like(name) == kind.what
            assert _named_like(name.upper()) == kind.what
    assert _named_like("compare_result_rank0_20250101.xlsx") == "an msprobe compare result"
    assert _named_like("grad_reduced_0-0.csv") == "an msprobe monitor table"
    assert _named_like("notes.txt") is None and _named_like("hosts.txt") is None


def test_a_compressed_file_reaches_only_the_decompressing_collectors(tmp_path: Path):
    # pip listing content, gzip-compressed: the checklist collector reads raw bytes only, so the
    # file is ignored (with the content named), not misread as a pip listing
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "train.log").write_text(
        " iteration        1/     100 | lm loss: 2.500000E+00 | loss scale: 1.0 | grad norm: 1.000 |\n")
    (tmp_path / "t" / "pip_freeze.txt.gz").write_bytes(gzip.compress(b"torch==2.1.0\nnumpy==1.26.0\nsix==1.16\n"))
    run = discover_runs(target=tmp_path / "t", warnings=Warnings()).runs[0]
    assert [a.kind for a in run.artefacts] == ["log"]
    assert [(p.name, why.split(";")[0]) for p, why in run.ignored] == [("pip_freeze.txt.gz", "gzip-compressed")]
