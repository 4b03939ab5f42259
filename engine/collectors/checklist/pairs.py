"""Which runs of a case are compared with which: target with baseline, every rerun with its
original, every further group of a grouped run with the first group."""
from __future__ import annotations

from precdx.collectors.base import Case, RunDir


def comparison_pairs(case: Case) -> list[tuple[RunDir, RunDir]]:
    """(compared run, reference run) pairs in a stable order."""
    base, tgt = case.by_role("baseline"), case.by_role("target")
    pairs: list[tuple[RunDir, RunDir]] = []
    if base and tgt:
        pairs.append((tgt[0], base[0]))
    pairs.extend((g, tgt[0]) for g in tgt[1:])
    pairs.extend((g, base[0]) for g in base[1:])
    if tgt:
        pairs.extend((r, tgt[0]) for r in case.by_role("target_rerun"))
    if base:
        pairs.extend((r, base[0]) for r in case.by_role("baseline_rerun"))
    return pairs


def pair_name(run: RunDir, ref: RunDir) -> str:
    return f"{run.name}~{ref.name}"
