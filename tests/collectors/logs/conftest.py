"""Fixtures for the logs-collector tests: cases built from scenario folders read in place, and
small helpers to pick facts."""
from __future__ import annotations

from pathlib import Path

from precdx.collectors.base import Case, RunDir
from precdx.collectors.logs import COLLECTOR
from precdx.errors import Warnings
from precdx.facts import Fact
from precdx.vocabulary import ROLES


def case_from_dir(root: Path) -> Case:
    """Runs of a scenario folder: role folders, grouped runs when they hold hosts.txt folders."""
    runs: list[RunDir] = []
    for d in sorted(p for p in root.iterdir() if p.is_dir() and p.name in ROLES):
        groups = sorted(g for g in d.iterdir() if g.is_dir() and (g / "hosts.txt").exists())
        if not groups:
            runs.append(RunDir(role=d.name, name=d.name, root=d))
        for g in groups:
            hosts = [line.split()[0] for line in (g / "hosts.txt").read_text().splitlines() if line.strip()]
            runs.append(RunDir(role=d.name, name=f"{d.name}/{g.name}", root=g, group=g.name, hosts=hosts))
    return Case(runs=runs, root=root)


def collect(case: Case) -> tuple[list[Fact], Warnings]:
    w = Warnings()
    return list(COLLECTOR.collect(case, w)), w


def one(facts: list[Fact], ftype: str, **match) -> Fact:
    found = [f for f in facts if f.type == ftype and all(getattr(f, k) == v for k, v in match.items())]
    assert len(found) == 1, f"expected one {ftype} {match}, got {len(found)}"
    return found[0]


def two_runs(tmp: Path, baseline_lines: list[str], target_lines: list[str], name: str = "train.log",
             extra: dict[str, list[str]] | None = None) -> Case:
    """A case with a baseline and a target folder holding the given log lines (plus more runs)."""
    runs = []
    for role, lines in [("baseline", baseline_lines), ("target", target_lines), *((extra or {}).items())]:
        d = tmp / role
        d.mkdir(parents=True, exist_ok=True)
        (d / name).write_text("\n".join(lines) + "\n")
        runs.append(RunDir(role=role, name=role, root=d))
    return Case(runs=runs, root=tmp)


class _Kit:
    case_from_dir = staticmethod(case_from_dir)
    collect = staticmethod(collect)
    one = staticmethod(one)
    two_runs = staticmethod(two_runs)


import pytest  # noqa: E402


@pytest.fixture
def kit() -> type[_Kit]:
    """Helpers for building cases and picking facts (fixtures keep test modules import-free)."""
    return _Kit


@pytest.fixture(scope="session")
def scenarios(shared_dir: Path) -> Path:
    return shared_dir / "scenarios"


def load_build_native():
    """tools/build_native.py as a module (tools/ is not a package)."""
    import importlib.util

    path = Path(__file__).resolve().parents[3] / "tools" / "build_native.py"
    spec = importlib.util.spec_from_file_location("build_native", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def kern(monkeypatch):
    """The compiled kernels, in use (PRECDX_NATIVE=1); the test skips without a C compiler (line
    shapes and multi-line records are only read in bulk with them)."""
    from precdx.collectors.logs import native

    if not ensure_kernels():
        pytest.skip("no C compiler: the kernels cannot be built")
    monkeypatch.setenv("PRECDX_NATIVE", "1")
    k = native.kernels()
    assert k is not None
    return k


def ensure_kernels() -> bool:
    """Build the block reader's C kernels when a compiler is there (make setup has, usually):
    True when they load."""
    from precdx.collectors.logs import native

    tool = load_build_native()
    if tool.compiler() is None:
        return False
    tool.build()
    if native.kernels() is None and native._loaded is None and not native._off():
        native._loaded = False  # looked for before the build: look again
    return native.kernels() is not None
