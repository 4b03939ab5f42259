"""One way to diagnose a case, used by the CLI, the HTTP service, the MCP server and the demo:

    discover the runs -> collect their facts -> add the facts given directly -> declare the
    differences made on purpose (`--changed KEY`, `changed:` in CASE_DIR/case.yaml) -> diagnose
    -> (when asked) the runs' training curves, which the HTML report plots.

`gather()` stops before the diagnosis (`precdx facts`, `precdx ask`, the planner); input checks
that name an interface's own options (--target, case_dir, an upload) stay with that interface.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

from precdx.collectors.base import Case
from precdx.errors import Warnings
from precdx.facts import Fact, FactSet

if TYPE_CHECKING:  # the models load with the diagnosis, not with `import precdx.api`
    from precdx.collectors.logs.series import StepSeries
    from precdx.diagnosis import Diagnosis

CASE_FILE = "case.yaml"


@dataclass
class Gathered:
    """The facts of a request, and the discovered case they came from (None: facts only)."""

    facts: FactSet
    case: Case | None


@dataclass
class CaseDiagnosis:
    """A diagnosis with what it was made from. `series` holds the runs' curves (baseline,
    target, reruns; runs without a usable curve left out) when asked for, None otherwise or
    when no run was given."""

    diagnosis: Diagnosis
    facts: FactSet
    case: Case | None
    series: list[StepSeries] | None = None


def gather(case_dir: str | Path | None = None, *, target: str | Path | None = None,
           baseline: str | Path | None = None, target_reruns: Iterable[str | Path] = (),
           baseline_reruns: Iterable[str | Path] = (), facts: Iterable[Fact] = (),
           changed: Iterable[str] = (), warnings: Warnings | None = None) -> Gathered:
    """The facts a diagnosis sees: those collected from the runs (when a case folder or a
    target is given), then `facts` (a contradiction with a collected fact is an error), then
    one `declared_change` per key of `changed` and of `changed:` in CASE_DIR/case.yaml."""
    from precdx.pipeline import collect, discover

    warnings = warnings if warnings is not None else Warnings()
    collected = FactSet()
    case = None
    if case_dir or target or baseline:
        case = discover(case_dir, target=target, baseline=baseline, target_reruns=target_reruns,
                        baseline_reruns=baseline_reruns, warnings=warnings)
        collected = collect(case, warnings)
    for fact in facts:
        collected.add(fact)
    _declare_changes(collected, case_dir, changed, warnings)
    return Gathered(collected, case)


def diagnose_case(case_dir: str | Path | None = None, *, target: str | Path | None = None,
                  baseline: str | Path | None = None, target_reruns: Iterable[str | Path] = (),
                  baseline_reruns: Iterable[str | Path] = (), facts: Iterable[Fact] = (),
                  changed: Iterable[str] = (), engine: str = "durable", lang: str = "en",
                  rules_path: str | None = None, warnings: Warnings | None = None,
                  series: bool = False) -> CaseDiagnosis:
    """Gather the facts (see `gather`) and diagnose them; with `series=True` also the runs'
    curves for plotting."""
    from precdx.diagnosis import diagnose

    warnings = warnings if warnings is not None else Warnings()
    got = gather(case_dir, target=target, baseline=baseline, target_reruns=target_reruns,
                 baseline_reruns=baseline_reruns, facts=facts, changed=changed, warnings=warnings)
    diag = diagnose(got.facts, engine=engine, lang=lang, rules_path=rules_path, warnings=warnings)
    curves = run_series(got.case) if series and got.case is not None else None
    return CaseDiagnosis(diag, got.facts, got.case, curves)


def run_series(case: Case) -> list[StepSeries]:
    """The training curve of each run that has one, in the order of the case's runs. Problems
    reading a curve were already reported when the facts were collected, so they are not
    repeated here."""
    from precdx.collectors.logs.runs import load_run_series

    scratch = Warnings()
    found = (load_run_series(case, run, scratch) for run in case.runs)
    return [s for s in found if s is not None and len(s)]


def _declare_changes(facts: FactSet, case_dir: str | Path | None, changed: Iterable[str],
                     warnings: Warnings) -> None:
    """`--changed KEY` and `changed:` in CASE_DIR/case.yaml become declared_change facts."""
    from precdx.experiments import canonical_key
    from precdx.facts.core import DeclaredChange

    keys = list(changed)
    if case_dir:
        path = Path(case_dir) / CASE_FILE
        if path.is_file():
            from precdx.yamlsafe import load_yaml_file
            try:
                doc = load_yaml_file(str(path))
            except Exception as exc:  # a broken case.yaml is a warning; the runs are still diagnosed
                warnings.add(f"case.yaml not read: {exc}", path=str(path))
                doc = None
            if isinstance(doc, dict) and doc.get("changed") is not None:
                listed = doc["changed"]
                if isinstance(listed, str):
                    listed = [listed]
                if isinstance(listed, list) and all(isinstance(k, str) for k in listed):
                    keys.extend(listed)
                else:
                    warnings.add("'changed' must be a list of setting names", path=str(path))
    for raw in dict.fromkeys(keys):
        name = canonical_key(raw)
        if not name:
            continue
        if not any(getattr(f, "type", None) == "declared_change" and getattr(f, "name", None) == name for f in facts):
            facts.add(DeclaredChange(type="declared_change", name=name, raw=raw))
