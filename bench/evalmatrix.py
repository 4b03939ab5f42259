"""Evaluation matrix library for bench/matrix (issue 14; kept out of engine/: it runs the msprobe
CLI): every fault the demo lab injects on the CPU x the evidence forms people actually send x the
trainers' log formats, with seeded random parameters (model size, fault step, fault strength,
which operator), each cell diagnosed and scored top-1 / top-3 / verdict per form and per fault.

Evidence forms (FORMS):
  dump_L0 / dump_L1 / dump_mix  msprobe dumps of every run (summary mode statistics or md5: md5
                                dumps carry the statistics too), at one level
  compare_csv                   only msprobe's compare CSVs, written by the real `msprobe compare`
                                (mindstudio-probe; skipped with a reason when it is missing)
  one_sided                     the dumps of the failing run(s) only, no baseline
  monitor                       only the training monitor's output folders (TrainerMon v1 CSVs,
                                with or without anomaly.json)
  logs                          logs + launch scripts/configs + env/pip listings only
A cell scores top-1 when the first hypothesis is in the case's acceptable set, fixed in advance in
bench/matrix_acceptable.yaml from the kb presentation table (tests/demo/test_matrix.py checks
every alternative against it); strict top-1 (the injected mode itself) is reported beside it.
Seeds make every case reproducible. Used by bench/matrix and, on a small slice, by the tests."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

import yaml

from precdx.demo.catalogue import FAULTS, sample_params

FORMS = ("dump_L0", "dump_L1", "dump_mix", "compare_csv", "one_sided", "monitor", "logs")
EVIDENCE_FORMS = ("dump_L0", "dump_L1", "dump_mix", "compare_csv", "monitor")
ACCEPTABLE_FILE = Path(__file__).resolve().parent / "matrix_acceptable.yaml"
_LOG_ONLY = ("msprobe_dump", "monitor_output", "msprobe_config.json")


def msprobe_cli() -> Path | None:
    """The `msprobe` command of this Python environment, or None when not installed."""
    exe = Path(sys.executable).parent / "msprobe"
    return exe if exe.is_file() else None


def load_acceptable(path: Path = ACCEPTABLE_FILE) -> dict[str, dict[str, list[str]]]:
    """fault -> form (or form class 'dumps') -> modes accepted beside the injected one."""
    return yaml.safe_load(path.read_text(encoding="utf-8")) or {}


def acceptable_for(table: dict, fault: str, form: str) -> list[str]:
    per = table.get(fault) or {}
    extra = per.get(form)
    if extra is None and form.startswith("dump_"):
        extra = per.get("dumps")
    return [FAULTS[fault].failure_mode] + list(extra or [])


@dataclass
class Cell:
    """One diagnosed (fault, seed, form)."""

    fault: str
    seed: int
    form: str
    expected: str
    top: list[str]
    verdict: str
    skipped: str | None = None
    acceptable: list[str] = field(default_factory=list)
    log_format: str = ""
    seconds: float = 0.0

    @property
    def top1(self) -> bool:
        return bool(self.top) and self.top[0] in (self.acceptable or [self.expected])

    @property
    def strict_top1(self) -> bool:
        return bool(self.top) and self.top[0] == self.expected

    @property
    def top3(self) -> bool:
        return any(m in self.top[:3] for m in (self.acceptable or [self.expected]))

    @property
    def verdict_ok(self) -> bool:
        return self.verdict == "misaligned"


@dataclass
class LabCase:
    """The lab runs of one (fault, seed): the case at each dump level and its parameters."""

    fault: str
    seed: int
    params: object
    cases: dict[str, Path]       # L0 / L1 / mix / stats (mix, statistics summary, for compare CSVs)


def build_case(fault: str, seed: int, work: Path, *, steps: int = 24, reuse: bool = False) -> LabCase:
    """Train the lab runs of one (fault, seed); `reuse` keeps case folders a previous run of the
    same (fault, seed, steps) left in `work` (the lab is deterministic)."""
    from precdx.demo.lab import run_case

    spec = FAULTS[fault]
    params = sample_params(spec, seed, steps)
    root = work / f"{fault}-{seed}"

    def case(name: str, **kw) -> Path:
        out = root / f"case_{name}"
        if reuse and (out / "expected.yaml").is_file():
            return out
        return run_case(fault, out, steps=steps, seed=seed, params=params, dump_runs=spec.runs, **kw)

    cases = {"mix": case("mix", level="mix", monitor=True)}
    for level in ("L0", "L1"):
        cases[level] = case(level, level=level, monitor=False)
    if params.summary_mode == "statistics":
        cases["stats"] = cases["mix"]
    else:
        cases["stats"] = case("stats", level="mix", summary_mode="statistics", monitor=False)
    return LabCase(fault, seed, params, cases)


def _runs(case: Path) -> list[str]:
    return [r.name for r in sorted(case.iterdir()) if r.is_dir()]


def _compare_jobs(case: Path, out: Path) -> list[tuple[str, str, str]]:
    """(target step dir, golden step dir, output dir) for every compare a user would run: the
    target against the baseline and, when there is one, the rerun against the target. Each result
    lands in the compared run's folder under a neutral name: which run the golden side was is
    for the collector to tell (from the rows themselves)."""
    jobs = []
    runs = _runs(case)
    pairs = [("target", "baseline")] + [(r, "target") for r in runs if r.startswith("target_rerun")]
    for run, golden in pairs:
        if run not in runs or golden not in runs:
            continue
        for step in sorted((case / run / "msprobe_dump").glob("step*")):
            dst = out / run / "msprobe_compare" / step.name / f"vs_{'gpu' if golden == 'baseline' else 'npu'}"
            dst.mkdir(parents=True, exist_ok=True)
            jobs.append((str(step), str(case / golden / "msprobe_dump" / step.name), str(dst)))
    return jobs


_DRIVER = """
import json, sys
from msprobe.msprobe import main
for tp, gp, out in json.loads(sys.argv[1]):
    sys.argv = ["msprobe", "compare", "-tp", tp, "-gp", gp, "-o", out]
    try:
        main()
    except SystemExit:
        pass
"""


def run_msprobe_compare(jobs: list[tuple[str, str, str]]) -> None:
    """All compares in one process of the real msprobe (its start-up costs seconds per call)."""
    if not jobs:
        return
    subprocess.run([sys.executable, "-c", _DRIVER, json.dumps(jobs)], check=True, capture_output=True,
                   timeout=600)
    missing = [out for _, _, out in jobs if not list(Path(out).glob("compare_result_*"))]
    if missing:
        raise RuntimeError(f"msprobe compare wrote nothing into {missing[0]}")


def make_form(lab: LabCase, form: str, out: Path, *, reuse: bool = False) -> tuple[Path | None, str | None]:
    """Build one evidence form of a lab case under `out`; (folder, None) or (None, why not).
    `reuse` keeps compare CSVs an earlier run wrote (the real msprobe is the slow part)."""
    if reuse and form == "compare_csv" and out.is_dir() and list(out.rglob("compare_result_*")):
        return out, None
    if out.exists():
        shutil.rmtree(out)
    spec = FAULTS[lab.fault]
    if form.startswith("dump_"):
        case = lab.cases[form.split("_", 1)[1]]
        for r in _runs(case):
            if (case / r / "msprobe_dump").is_dir():
                shutil.copytree(case / r / "msprobe_dump", out / r / "msprobe_dump")
        return out, None
    if form == "one_sided":
        if not spec.one_sided:
            return None, "a dump without its reference carries no evidence of this fault (no NaN, no rerun)"
        case = lab.cases["mix"]
        for r in _runs(case):
            if r != "baseline" and (case / r / "msprobe_dump").is_dir():
                shutil.copytree(case / r / "msprobe_dump", out / r / "msprobe_dump")
        return out, None
    if form == "monitor":
        case = lab.cases["mix"]
        for r in _runs(case):
            shutil.copytree(case / r / "monitor_output", out / r / "monitor_output")
        return out, None
    if form == "logs":
        case = lab.cases["mix"]
        for r in _runs(case):
            shutil.copytree(case / r, out / r, ignore=shutil.ignore_patterns(*_LOG_ONLY))
        return out, None
    if form == "compare_csv":
        if msprobe_cli() is None:
            return None, "mindstudio-probe is not installed (pip install mindstudio-probe)"
        run_msprobe_compare(_compare_jobs(lab.cases["stats"], out))
        return out, None
    raise ValueError(f"unknown evidence form {form!r}")


def diagnose_form(folder: Path) -> tuple[list[str], str]:
    from precdx.api import diagnose_case

    roles = {p.name: p for p in folder.iterdir() if p.is_dir()}
    if "target" not in roles:   # a rerun-only form still needs its target folder to exist
        (folder / "target").mkdir()
        roles["target"] = folder / "target"
    reruns = [roles[r] for r in sorted(roles) if r.startswith("target_rerun")]
    out = diagnose_case(target=roles["target"], baseline=roles.get("baseline"), target_reruns=reruns).diagnosis
    return [h.failure_mode for h in out.hypotheses], out.verdict


def run_matrix(faults: Iterable[str], seeds: Iterable[int], forms: Iterable[str], work: Path, *,
               steps: int = 24, on_cell=None, reuse: bool = False) -> list[Cell]:
    table = load_acceptable()
    forms = list(forms)
    cells: list[Cell] = []
    for fault in faults:
        for seed in seeds:
            lab = build_case(fault, seed, work, steps=steps, reuse=reuse)
            for form in forms:
                started = time.time()
                folder, why = make_form(lab, form, work / f"{fault}-{seed}" / form, reuse=reuse)
                expected = FAULTS[fault].failure_mode
                cell = Cell(fault, seed, form, expected, [], "", skipped=why,
                            acceptable=acceptable_for(table, fault, form), log_format=lab.params.log_format)
                if folder is not None:
                    cell.top, cell.verdict = diagnose_form(folder)
                cell.seconds = time.time() - started
                cells.append(cell)
                if on_cell is not None:
                    on_cell(cell)
    return cells


def _rate(n: int, d: int) -> str:
    return f"{n:>3}/{d:<3} {100.0 * n / d:5.1f}%" if d else f"{'-':>13}"


def summarise(cells: list[Cell]) -> str:
    """Per form, per fault and per log format (logs form): top-1 (acceptable set), strict top-1,
    top-3, verdict over the diagnosed cells."""
    lines = []
    groups_by = (("form", lambda c: c.form), ("fault", lambda c: c.fault),
                 ("log format (logs form)", lambda c: c.log_format if c.form == "logs" else None))
    for title, key in groups_by:
        groups: dict[str, list[Cell]] = {}
        for c in cells:
            k = key(c)
            if k is not None:
                groups.setdefault(k, []).append(c)
        if not groups:
            continue
        lines.append(f"{'per ' + title:<24} {'top1':>13} {'strict top1':>13} {'top3':>13} {'verdict':>13}  skipped")
        for name, cs in groups.items():
            done = [c for c in cs if c.skipped is None]
            n = len(done)
            lines.append(f"{name:<24} {_rate(sum(c.top1 for c in done), n)} {_rate(sum(c.strict_top1 for c in done), n)} "
                         f"{_rate(sum(c.top3 for c in done), n)} {_rate(sum(c.verdict_ok for c in done), n)}  "
                         f"{len(cs) - n}")
        lines.append("")
    done = [c for c in cells if c.skipped is None]
    ev = [c for c in done if c.form in EVIDENCE_FORMS]
    lines.append(f"evidence-bearing forms: top1={sum(c.top1 for c in ev)}/{len(ev)} "
                 f"strict={sum(c.strict_top1 for c in ev)}/{len(ev)}")
    lines.append(f"top1={sum(c.top1 for c in done)}/{len(done)} strict={sum(c.strict_top1 for c in done)}/{len(done)} "
                 f"top3={sum(c.top3 for c in done)}/{len(done)} verdict={sum(c.verdict_ok for c in done)}/{len(done)} "
                 f"skipped={len(cells) - len(done)}")
    return "\n".join(lines)
