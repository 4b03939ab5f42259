"""Shared test fixtures: where ../shared lives (read in place, never copied)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

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
