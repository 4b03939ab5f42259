"""Helpers for msprobe collector tests: build a Case from folders by sniffing their files (as
discovery would), and collect facts inline (no worker processes: small inputs)."""
from __future__ import annotations

from pathlib import Path

import pytest

from precdx.collectors.base import Case, RunDir
from precdx.collectors.msprobe import COLLECTOR
from precdx.collectors.msprobe.collect import collect
from precdx.collectors.msprobe.executor import InlineExecutor
from precdx.errors import Warnings


def run_dir(role: str, root: Path, name: str | None = None) -> RunDir:
    run = RunDir(role=role, name=name or role, root=root)
    for f in sorted(root.rglob("*")):
        if f.is_file():
            with f.open("rb") as fh:
                art = COLLECTOR.sniff(f, fh.read(65536))
            if art is not None:
                run.artefacts.append(art)
    return run


def collect_case(runs: list[RunDir]) -> tuple[list, Warnings]:
    warnings = Warnings()
    facts = list(collect(Case(runs), warnings, quiet=True, executor=InlineExecutor()))
    return facts, warnings


def of_type(facts: list, ftype: str, **match) -> list:
    return [f for f in facts if f.type == ftype and all(getattr(f, k) == v for k, v in match.items())]


@pytest.fixture(scope="session")
def samples(shared_dir: Path) -> Path:
    return shared_dir / "msprobe-samples"


@pytest.fixture(scope="session")
def scenarios(shared_dir: Path) -> Path:
    return shared_dir / "scenarios"


@pytest.fixture(scope="session")
def upstream(shared_dir: Path) -> Path:
    return shared_dir / "msprobe-upstream-fixtures"
