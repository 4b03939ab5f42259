"""The checklist collector: configuration, environment, installed libraries, model structure
listings and downstream evaluation of each run, and how they differ between the compared runs.

Artefact kinds it recognises: config.launch, config.yaml, config.json, config.toml, env, pip,
hosts, eval, model.print, model.params.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable

from precdx.collectors.base import Artefact, Case
from precdx.errors import Warnings
from precdx.facts import Fact


class ChecklistCollector:
    name = "checklist"

    def sniff(self, path: Path, head: bytes) -> Artefact | None:
        from precdx.collectors.checklist.sniff import sniff
        return sniff(path, head)

    def collect(self, case: Case, warnings: Warnings) -> Iterable[Fact]:
        from precdx.collectors.checklist.collect import collect
        return collect(case, warnings)


COLLECTOR = ChecklistCollector()
