"""Fixtures for the rulepack tests: a tiny knowledge base the engine reads instead of kb/."""
from __future__ import annotations

import pytest

from tests.rulepack.builders import clear_engine_caches, use_kb, write_kb


@pytest.fixture
def tiny_kb(tmp_path, monkeypatch):
    root = use_kb(monkeypatch, write_kb(tmp_path / "kb"))
    yield root
    clear_engine_caches()
