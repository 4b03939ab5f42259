"""Collectors: each subpackage/module here that defines `COLLECTOR` is one artefact area; its
`kinds` module (`READS`) declares the artefact kinds it reads."""
from __future__ import annotations

import importlib
import pkgutil

from precdx.collectors.base import (  # noqa: F401
    ROLE_ORDER, Artefact, ArtefactKind, Case, Collector, Reads, RunDir,
)

_cache: list | None = None
_reads: dict[str, Reads] = {}


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


def reads_of(collector: Collector) -> Reads:
    """What a collector declares it reads: `READS` in the `kinds` module of the collector's
    package (engine/collectors/<name>/kinds.py); nothing for a collector without one."""
    name = getattr(collector, "name", "")
    if not isinstance(name, str) or not name.isidentifier():
        return Reads()
    if name not in _reads:
        try:
            module = importlib.import_module(f"{__name__}.{name}.kinds")
        except ModuleNotFoundError as exc:
            if exc.name not in (f"{__name__}.{name}", f"{__name__}.{name}.kinds"):
                raise  # a kinds module that exists but imports something missing is a bug
            module = None
        _reads[name] = getattr(module, "READS", None) or Reads()
    return _reads[name]


def artefact_kinds() -> list[ArtefactKind]:
    """Every artefact kind the registered collectors declare, collector by collector."""
    return [kind for collector in all_collectors() for kind in reads_of(collector).kinds]
