"""Curves from experiment-tracking tools: TensorBoard event files (Megatron --tensorboard-dir,
HF, torchtitan, NeMo), W&B run folders (`wandb-history.jsonl`, CSV exports; binary `.wandb`
files with the optional wandb SDK), MLflow file stores (`mlruns/<exp>/<run>/metrics/<name>`) and
plain CSV / JSON lines of step and metrics.

This package recognises those artefacts (`sniff`, kind `log.tracking`, and `tracking.tags` for a
user's scalar-name mapping) and turns a run's tracking source into the logs collector's step
series builder (`curve_builders`). It emits no facts itself: the logs collector uses a tracking
curve for a run without a usable text log, so one series per run feeds the same comparison,
facts and rules whatever wrote the curve. TensorBoard files are read with tensorboard's own
event reader (`pip install 'precdx[tracking]'`).
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable

from precdx.collectors.base import Artefact, Case
from precdx.errors import Warnings
from precdx.facts import Fact

NAME = "tracking"


class TrackingCollector:
    name = NAME

    def sniff(self, path: Path, head: bytes) -> Artefact | None:
        from precdx.collectors.tracking.sniff import sniff
        return sniff(path, head)

    def collect(self, case: Case, warnings: Warnings) -> Iterable[Fact]:
        """Nothing of its own: tracking curves reach the facts through the logs collector."""
        return ()


def curve_builders(case, run, warnings):
    """See `precdx.collectors.tracking.series.curve_builders`."""
    from precdx.collectors.tracking.series import curve_builders as build
    return build(case, run, warnings)


COLLECTOR = TrackingCollector()

__all__ = ["COLLECTOR", "TrackingCollector", "curve_builders"]
