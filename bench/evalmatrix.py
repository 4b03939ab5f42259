"""Evaluation matrix library for bench/matrix (issue 14; kept out of engine/: it runs the msprobe CLI): demo-lab faults x the evidence forms people actually send --
the whole case, the dumps only, msprobe's compare CSVs only (written by the real `msprobe
compare` when mindstudio-probe is installed), and a one-sided dump of the failing run(s) only --
each diagnosed, scored top-1 / top-3 / verdict per form and per fault. Seeds make every case
reproducible. Used by bench/matrix and, on a small slice, by the test suite."""
from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from engine.demo.catalogue import FAULTS

FORMS = ("full", "dumps", "compare_csv", "one_sided")


def msprobe_cli() -> Path | None:
    """The `msprobe` command of this Python environment, or None when not installed."""
    exe = Path(sys.executable).parent / "msprobe"
    return exe if exe.is_file() else None


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

    @property
    def top1(self) -> bool:
        return bool(self.top) and self.top[0] == self.expected

    @property
    def top3(self) -> bool:
        return self.expected in self.top[:3]

    @property
    def verdict_ok(self) -> bool:
        return self.verdict == "misaligned"


def _dump_runs(case: Path) -> list[str]:
    return [r.name for r in sorted(case.iterdir()) if (r / "msprobe_dump").is_dir()]


def make_form(case: Path, form: str, out: Path) -> tuple[Path | None, str | None]:
    """Build one evidence form of a demo case under `out`; (folder, None) or (None, why not)."""
    if out.exists():
        shutil.rmtree(out)
    runs = _dump_runs(case)
    if form == "full":
        shutil.copytree(case, out)
        return out, None
    if not runs:
        return None, "the fault writes no dump"
    if form == "dumps":
        for r in runs:
            shutil.copytree(case / r / "msprobe_dump", out / r / "msprobe_dump")
        return out, None
    if form == "one_sided":
        sides = [r for r in runs if r != "baseline"]
        for r in sides:
            shutil.copytree(case / r / "msprobe_dump", out / r / "msprobe_dump")
        return (out, None) if sides else (None, "only the baseline was dumped")
    if form == "compare_csv":
        exe = msprobe_cli()
        if exe is None:
            return None, "mindstudio-probe is not installed (pip install mindstudio-probe)"
        pairs = [("target_rerun", "target")] if "target_rerun" in runs else [("target", "baseline")]
        for run, golden in pairs:
            if run not in runs or golden not in runs:
                return None, f"needs dumps of {run} and {golden}"
            for step in sorted((case / run / "msprobe_dump").iterdir()):
                dst = out / run / "msprobe_compare" / step.name
                dst.mkdir(parents=True, exist_ok=True)
                subprocess.run([str(exe), "compare", "-tp", str(step), "-gp",
                                str(case / golden / "msprobe_dump" / step.name), "-o", str(dst)],
                               check=True, capture_output=True, timeout=600)
        return out, None
    raise ValueError(f"unknown evidence form {form!r}")


def diagnose_form(folder: Path) -> tuple[list[str], str]:
    from engine.api import diagnose_case

    roles = {p.name: p for p in folder.iterdir() if p.is_dir()}
    if "target" not in roles:   # a rerun-only form still needs its target folder to exist
        (folder / "target").mkdir()
        (folder / "target" / "README.txt").write_text("only the rerun's compare result was kept\n")
        roles["target"] = folder / "target"
    reruns = [roles[r] for r in roles if r.startswith("target_rerun")]
    out = diagnose_case(target=roles["target"], baseline=roles.get("baseline"), target_reruns=reruns).diagnosis
    return [h.failure_mode for h in out.hypotheses], out.verdict


def run_matrix(faults: Iterable[str], seeds: Iterable[int], forms: Iterable[str], work: Path, *,
               steps: int = 24) -> list[Cell]:
    from engine.demo.lab import run_case

    cells: list[Cell] = []
    for fault in faults:
        for seed in seeds:
            case = run_case(fault, work / f"{fault}-{seed}" / "case", steps=steps, seed=seed)
            for form in forms:
                folder, why = make_form(case, form, work / f"{fault}-{seed}" / form)
                expected = FAULTS[fault].failure_mode
                if folder is None:
                    cells.append(Cell(fault, seed, form, expected, [], "", skipped=why))
                    continue
                top, verdict = diagnose_form(folder)
                cells.append(Cell(fault, seed, form, expected, top, verdict))
    return cells


def summarise(cells: list[Cell]) -> str:
    """Per form and per fault: top1 / top3 / verdict counts over the diagnosed cells."""
    lines = []
    for title, key in (("form", lambda c: c.form), ("fault", lambda c: c.fault)):
        groups: dict[str, list[Cell]] = {}
        for c in cells:
            groups.setdefault(key(c), []).append(c)
        lines.append(f"{'per ' + title:<24} {'top1':>7} {'top3':>7} {'verdict':>8}  skipped")
        for name, cs in groups.items():
            done = [c for c in cs if c.skipped is None]
            n = len(done)
            lines.append(f"{name:<24} {sum(c.top1 for c in done):>3}/{n:<3} {sum(c.top3 for c in done):>3}/{n:<3} "
                         f"{sum(c.verdict_ok for c in done):>4}/{n:<3}  {len(cs) - n}")
        lines.append("")
    done = [c for c in cells if c.skipped is None]
    lines.append(f"top1={sum(c.top1 for c in done)}/{len(done)} top3={sum(c.top3 for c in done)}/{len(done)} "
                 f"verdict={sum(c.verdict_ok for c in done)}/{len(done)} skipped={len(cells) - len(done)}")
    return "\n".join(lines)
