"""Shared test fixtures: where ../shared lives (read in place, never copied)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

# (as the CLI does, engine/cli.py: no spinning OpenBLAS threads in the workers and the commands
# they run; set before any test module imports numpy)
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("PRECDX_SHARED", REPO.parent / "shared")).resolve()


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    if not SHARED.is_dir():
        pytest.skip(f"shared material not found at {SHARED} (set PRECDX_SHARED)")
    return SHARED


@pytest.fixture(scope="session")
def repo_dir() -> Path:
    return REPO


# ---------------------------------------------------------------- the fast lane (-m "not slow")
# A module whose every test is slow says so with a module-level `pytestmark = pytest.mark.slow`.
# When the mark expression leaves slow tests out, such a module is not even imported: several
# of them import torch, transformers or lightning, which alone costs seconds of the fast lane.
# Services tests marked slow here, by node id, because tests/service stays as it was through the
# router split of the service (issue 15).
SLOW_ELSEWHERE = {
    "tests/service/test_openapi_fuzz.py": "fuzzes the whole API",
    "tests/service/test_sessions.py::test_sessions_survive_a_server_restart": "starts and restarts a real server",
    "tests/service/test_api.py::test_slow_diagnosis_times_out_with_408_and_the_loop_keeps_serving":
        "waits for the request time-out",
    "tests/service/test_sessions.py::test_sessions_expire": "waits for sessions to expire",
    # the throwaway PostgreSQL server is started only for these
    "tests/service/test_sessions.py::test_store_round_trip_update_expiry_and_isolation[postgresql]": "PostgreSQL",
    "tests/service/test_sessions.py::test_concurrent_turns_are_serialised[postgresql]": "PostgreSQL",
    "tests/service/test_sessions.py::test_two_service_instances_share_sessions_on_postgresql": "PostgreSQL",
    # whole modules that cost the fast lane seconds each (measured with --durations=0 on an idle
    # 2-core machine); they run in `make test` and CI like every other test
    "tests/collectors/logs/test_logs_blocks.py": "block reader == per-line reader on every excerpt, block size, thread count",
    "tests/corpus/test_corpus.py": "reads the whole shared log corpus",
    "tests/service/test_chat_api.py": "runs the real CLI and the service on scenario facts",
    "tests/service/test_chat_sessions.py": "archive uploads into sessions",
    "tests/service/test_chat.py": "renders every chat format for several scenarios and languages",
    "tests/test_end_to_end.py": "diagnoses every shared scenario on both engines",
    "tests/test_html_report.py": "headless Chromium",
    "tests/test_package_name.py": "builds wheels and runs the CLI in subprocesses",
    "tests/collectors/msprobe/test_split_equivalence.py": "dump split across processes against the reference",
    "tests/planner/test_consult.py": "runs `precdx ask` in subprocesses",
    "tests/cli/test_cli_edges.py": "runs the real command for every CLI edge",
    "tests/test_api.py": "the service and the MCP server answer as the API",
}


def _deselects_slow(config) -> bool:
    expr = config.getoption("markexpr", "") or ""
    if "slow" not in expr:
        return False
    from _pytest.mark.expression import Expression

    compiled = Expression.compile(expr)
    # a wholly slow module is skipped only when the expression is false for its tests whatever
    # other marks they carry (checked at both extremes: no other mark, every other mark)
    return not compiled.evaluate(lambda name: name == "slow") and not compiled.evaluate(lambda name: True)


def _wholly_slow(path: Path) -> bool:
    import ast

    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return False
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets):
            marks = node.value.elts if isinstance(node.value, (ast.List, ast.Tuple)) else [node.value]
            return any(isinstance(m, ast.Attribute) and m.attr == "slow" for m in marks)
    return False


def pytest_ignore_collect(collection_path: Path, config):
    if collection_path.suffix != ".py" or not collection_path.name.startswith("test_"):
        return None
    rel = collection_path.resolve().relative_to(REPO).as_posix() if collection_path.resolve().is_relative_to(REPO) \
        else ""
    if _deselects_slow(config) and (_wholly_slow(collection_path) or SLOW_ELSEWHERE.get(rel)):
        return True
    return None


def pytest_collection_modifyitems(config, items):
    for item in items:
        path = Path(str(item.path)).resolve()
        rel = path.relative_to(REPO).as_posix() if path.is_relative_to(REPO) else ""
        why = SLOW_ELSEWHERE.get(rel) or SLOW_ELSEWHERE.get(f"{rel}::{item.originalname}") \
            or SLOW_ELSEWHERE.get(f"{rel}::{item.name}")
        if why:
            item.add_marker(pytest.mark.slow)
