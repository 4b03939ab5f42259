"""Fixtures of the matcher tests."""
from __future__ import annotations

import pytest

from tests.matching.vocab import TEST_TYPES, register_types, unregister_types


@pytest.fixture(scope="module", autouse=True)
def tdx_vocabulary():
    """The test-only fact types exist while one test module runs."""
    added = register_types(TEST_TYPES)
    yield
    unregister_types(added)
