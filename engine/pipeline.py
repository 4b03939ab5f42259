"""Run the collectors over a discovered case and gather one FactSet (the checklist of the
procedure: every area contributes what its artefacts show; a broken artefact costs a warning,
not the whole diagnosis)."""
from __future__ import annotations

from pathlib import Path
from typing import Iterable

from precdx.collectors import Case, all_collectors
from precdx.errors import PrecdxError, Warnings
from precdx.facts import FactSet


def discover(case_dir: str | Path | None = None, *, target: str | Path | None = None,
             baseline: str | Path | None = None, target_reruns: Iterable[str | Path] = (),
             baseline_reruns: Iterable[str | Path] = (), warnings: Warnings | None = None) -> Case:
    from precdx import discovery

    if case_dir is not None:
        if target or baseline:
            raise PrecdxError("give either a case folder or --target/--baseline, not both")
        # a folder without baseline/ and target/ sub-folders is one run, diagnosed on its own
        return discovery.discover_folder(Path(case_dir), warnings=warnings)
    if target is None:
        raise PrecdxError("nothing to diagnose: give a case folder, --target (and --baseline), or --facts")
    return discovery.discover_runs(target=Path(target), baseline=Path(baseline) if baseline else None,
                                   target_reruns=[Path(p) for p in target_reruns],
                                   baseline_reruns=[Path(p) for p in baseline_reruns], warnings=warnings)


def collect(case: Case, warnings: Warnings) -> FactSet:
    """All facts of a case. Collector contradictions keep the first fact and warn."""
    from precdx.collectors.checklist.runs import run_facts

    facts = FactSet()
    _add_all(facts, run_facts(case), warnings)
    for collector in all_collectors():
        try:
            produced = list(collector.collect(case, warnings))
        except PrecdxError as exc:
            warnings.add(f"{collector.name} collector: {exc.message}", path=exc.path, line=exc.line,
                         source=collector.name)
            continue
        _add_all(facts, produced, warnings)
    return facts


def _add_all(facts: FactSet, produced: Iterable, warnings: Warnings) -> None:
    for fact in produced:
        try:
            facts.add(fact)
        except PrecdxError as exc:
            warnings.add(exc.message + " (kept the first)", path=exc.path)
