"""msprobe (mindstudio-probe) artefacts: dumps and our own comparison of them, compare results,
first-diff / first-overflow analyses, training monitor, config_check, pre-check and
free-benchmark outputs. `COLLECTOR` is what discovery and the engine call."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Iterable

from precdx.collectors.base import Artefact, Case
from precdx.collectors.msprobe.sniff import sniff as _sniff
from precdx.errors import Warnings
from precdx.facts import Fact

if TYPE_CHECKING:  # the readers (numpy, the dump parsers) load with the first collect
    from precdx.collectors.msprobe.executor import Executor


class MsprobeCollector:
    """Recognises msprobe files and turns a case's msprobe artefacts into facts."""

    name = "msprobe"

    def __init__(self) -> None:
        self.quiet = False                       # callers producing JSON set this
        self.executor: Executor | None = None    # None: local process pool (or Dask by env)

    def sniff(self, path: Path, head: bytes) -> Artefact | None:
        return _sniff(path, head)

    def collect(self, case: Case, warnings: Warnings, *, quiet: bool | None = None) -> Iterable[Fact]:
        if not any(run.files("msprobe") for run in case.runs):
            return []  # every reader starts from the run's msprobe artefacts: nothing to load
        from precdx import progress
        from precdx.collectors.msprobe.collect import collect as _collect
        if quiet is None:
            quiet = self.quiet or not progress.enabled()
        return list(_collect(case, warnings, quiet=quiet,
                             executor=self.executor))


COLLECTOR = MsprobeCollector()
