"""Collectors: each subpackage/module here that defines `COLLECTOR` is one artefact area."""
from __future__ import annotations

import importlib
import pkgutil

from engine.collectors.base import Artefact, Case, Collector, RunDir, ROLE_ORDER  # noqa: F401

_cache: list | None = None


def all_collectors() -> list[Collector]:
    """Every registered collector, in a stable order (by module name)."""
    global _cache
    if _cache is None:
        found = []
        for mod in sorted(m.name for m in pkgutil.iter_modules(__path__)):
            if mod == "base":
                continue
            module = importlib.import_module(f"{__name__}.{mod}")
            collector = getattr(module, "COLLECTOR", None)
            if collector is not None:
                found.append(collector)
        _cache = found
    return _cache
