"""Issue 17: the per-rank dump work on a real Dask cluster gives exactly the facts of the local
process pool (a 2-worker LocalCluster, threads: the same code path as a remote cluster through
`Client.map`, without the process start-up cost in the suite)."""
from __future__ import annotations

import math
from pathlib import Path

import pytest

from precdx.collectors.base import Case
from precdx.collectors.msprobe.collect import collect
from precdx.collectors.msprobe.executor import DaskExecutor, LocalProcessExecutor
from precdx.errors import Warnings
from tests.collectors.msprobe.conftest import run_dir
from tests.collectors.msprobe.test_split_equivalence import _entries, _other, _set_stat, _write

pytest.importorskip("dask.distributed")

RANKS = 4


def _case(root: Path) -> Case:
    for r in range(RANKS):
        base = _entries(120, 100 + r)
        target = _other(base, 200 + r)
        if r == 1:
            _set_stat(target, 70, "output", "Norm", 500.0)     # a divergence on rank 1
        if r == 2:
            _set_stat(target, 40, "output", "Max", math.nan)   # the first NaN on rank 2
        _write(root / "target" / "step0" / f"rank{r}" / "dump.json", target)
        _write(root / "baseline" / "step0" / f"rank{r}" / "dump.json", base)
    return Case([run_dir("target", root / "target"), run_dir("baseline", root / "baseline")])


def _facts(case: Case, executor) -> tuple[list, list]:
    w = Warnings()
    facts = [f.to_json() for f in collect(case, w, quiet=True, executor=executor)]
    return facts, list(w.items)


def test_dask_local_cluster_equals_the_local_pool(tmp_path):
    case = _case(tmp_path)
    local = _facts(case, LocalProcessExecutor(workers=2))
    ex = DaskExecutor(workers=2, processes=False)
    try:
        dask = _facts(case, ex)
    finally:
        ex.close()
    assert dask == local
    kinds = {f["type"] for f in local[0]}
    assert {"dump_info", "first_divergence", "first_nan"} <= kinds, kinds
    assert sum(1 for f in local[0] if f["type"] == "dump_info") == 2 * RANKS
