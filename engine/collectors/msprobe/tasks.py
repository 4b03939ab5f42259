"""The per-rank unit of work: compare (or just scan) one step/rank dump and return plain data.
Tasks are picklable top-level functions so an executor can run them in worker processes or on
a cluster."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from precdx.collectors.msprobe.comparison import PassResult, SideScan, compare_dumps, scan_only
from precdx.collectors.msprobe.context import code_lines, module_paths
from precdx.collectors.msprobe.localise import (
    Located, classify_divergence, classify_nondeterminism, locate_first_nan)
from precdx.collectors.msprobe.naming import parse_entry_name
from precdx.collectors.msprobe.split import compare_dumps_split
from precdx.errors import PrecdxError, Warnings


@dataclass(frozen=True)
class DumpTask:
    """Compare `run_dump` with `against_dump` (None: only scan `run_dump`)."""

    run_dump: str
    against_dump: str | None = None
    exact: bool = False          # a run against its own rerun
    parts: int = 1               # worker processes for this one pair (split.compare_dumps_split)


@dataclass
class SideReport:
    """What one dump was, and its first Inf/NaN."""

    path: str
    task: str
    level: str
    framework: str
    summary_mode: str
    api_count: int
    module_count: int
    nonfinite_count: int
    complete: bool
    has_stack: bool
    has_construct: bool
    first_nan: Located | None = None


@dataclass
class TaskReport:
    """Everything a DumpTask found, as plain data."""

    task: DumpTask
    run: SideReport | None = None
    against: SideReport | None = None
    mode: str | None = None
    n_compared: int = 0
    n_error: int = 0
    n_warning: int = 0
    n_diverged: int = 0
    n_fallback: int = 0
    max_out_err: float | None = None
    first: Located | None = None
    nan_baseline_abnormal: bool | None = None
    run_only: dict = field(default_factory=dict)       # (kind, name) -> count
    against_only: dict = field(default_factory=dict)
    warnings: list = field(default_factory=list)       # (message, path)
    fatal: str | None = None


def _side(scan: SideScan) -> SideReport:
    folder = scan.path.parent
    construct = folder / "construct.json"
    return SideReport(
        path=str(scan.path), task=scan.header.task, level=scan.header.level,
        framework=scan.header.framework, summary_mode=scan.summary_mode,
        api_count=scan.apis, module_count=scan.modules, nonfinite_count=scan.nonfinite,
        complete=scan.complete, has_stack=(folder / "stack.json").is_file(),
        has_construct=construct.is_file() and construct.stat().st_size > 4,
        first_nan=locate_first_nan(scan))


def _add_context(located: list[Located], dump_json: Path, warnings: Warnings) -> None:
    if not located:
        return
    folder = dump_json.parent
    construct = folder / "construct.json"
    stack = folder / "stack.json"
    names = [x.api for x in located]
    paths = module_paths(construct if construct.is_file() else None, names, warnings)
    lines = code_lines(stack if stack.is_file() else None, names, warnings)
    for x in located:
        x.module = paths.get(x.api) or parse_entry_name(x.api).module_path
        x.code_line = lines.get(x.api)


def _scan_warnings(scan: SideScan, warnings: Warnings) -> None:
    for message in scan.issues.messages():
        warnings.add(message, path=str(scan.path))
    if not scan.complete:
        warnings.add(f"dump.json is damaged: {scan.error}; results use the entries read before it",
                     path=str(scan.path))
    elif scan.entries == 0 and scan.header.task != "structure":
        warnings.add("dump.json holds no entries (empty dump): nothing to compare", path=str(scan.path))


def run_task(task: DumpTask) -> TaskReport:
    """Do one task; never raises for bad input (problems become warnings or `fatal`)."""
    report = TaskReport(task)
    warnings = Warnings()
    try:
        run_path = Path(task.run_dump)
        if task.against_dump is None:
            scan = scan_only(run_path)
            _scan_warnings(scan, warnings)
            report.run = _side(scan)
            if report.run.first_nan:
                _add_context([report.run.first_nan], run_path, warnings)
        else:
            against_path = Path(task.against_dump)
            res: PassResult = (compare_dumps_split(run_path, against_path, exact=task.exact, parts=task.parts)
                               if task.parts > 1 else compare_dumps(run_path, against_path, exact=task.exact))
            _scan_warnings(res.run, warnings)
            _scan_warnings(res.against, warnings)
            for note in res.notes:
                warnings.add(note, path=str(run_path))
            report.run, report.against = _side(res.run), _side(res.against)
            report.mode = res.mode
            report.n_compared, report.n_error, report.n_warning = res.n_compared, res.n_error, res.n_warning
            report.n_diverged, report.n_fallback = res.n_diverged, res.n_fallback
            report.max_out_err = res.max_out_err if res.n_compared else None
            report.run_only = dict(res.run_only)
            report.against_only = dict(res.against_only)
            report.nan_baseline_abnormal = res.nan_twin_abnormal
            cand = res.first or res.first_module
            if cand is not None:
                report.first = (classify_nondeterminism(cand) if task.exact
                                else classify_divergence(cand, res))
            to_place = [x for x in (report.first, report.run.first_nan) if x is not None]
            _add_context(to_place, run_path, warnings)
            if report.against.first_nan:
                _add_context([report.against.first_nan], against_path, warnings)
    except PrecdxError as exc:
        report.fatal = exc.render()
    except OSError as exc:
        report.fatal = f"{task.run_dump}: cannot read ({exc.strerror or exc})"
    report.warnings = [(w["message"], w.get("path")) for w in warnings]
    return report
