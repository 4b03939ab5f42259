"""Training-log collector: recognises console logs of the supported trainers, HF
`trainer_state.json` and user-declared log formats, builds one step series per run, and emits
the per-run and comparison facts (loss_series, loss_compare, rerun_compare, grad_norm_compare,
nan_compare, spike_compare, loss_scale_trend, group_outlier, group_summary, log_event)."""
from __future__ import annotations

from pathlib import Path
from typing import Iterable

from precdx.collectors.base import Artefact, Case, RunDir
from precdx.errors import PrecdxError, Warnings
from precdx.facts import Fact

NAME = "logs"


class LogsCollector:
    name = NAME

    def sniff(self, path: Path, head: bytes) -> Artefact | None:
        from precdx.collectors.logs.runs import sniff_file
        return sniff_file(path, head)

    def collect(self, case: Case, warnings: Warnings) -> Iterable[Fact]:
        from precdx.collectors.logs.runs import collect_case
        return collect_case(case, warnings)


COLLECTOR = LogsCollector()

__all__ = ["COLLECTOR", "LogsCollector", "PrecdxError", "RunDir"]
