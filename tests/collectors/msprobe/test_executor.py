"""Executors run per-rank tasks and return results in task order."""
from __future__ import annotations

import io
from pathlib import Path

import pytest

from precdx.collectors.msprobe.executor import InlineExecutor, LocalProcessExecutor, dask_available
from precdx.collectors.msprobe.progress import Progress
from precdx.collectors.msprobe.tasks import DumpTask, run_task


def _tasks(samples: Path) -> list[DumpTask]:
    root = samples / "15_distributed_2rank_gloo/dump_nan_op_on_rank1/step0"
    return [DumpTask(str(root / f"rank{r}/dump.json")) for r in (0, 1)]


def _digest(reports) -> list:
    return [(r.run.api_count, r.run.first_nan.api, r.run.first_nan.kind) for r in reports]


def test_local_pool_matches_inline(samples: Path) -> None:
    tasks = _tasks(samples)
    inline = _digest(InlineExecutor().map(run_task, tasks))
    pooled = _digest(LocalProcessExecutor(workers=2).map(run_task, tasks))
    assert pooled == inline
    assert inline[1][1] == "Tensor.__mul__.1.forward"


@pytest.mark.slow   # starts worker processes (test_cluster.py runs a threaded cluster in the fast lane)
@pytest.mark.skipif(not dask_available(), reason="dask.distributed is not installed")
def test_dask_local_cluster_matches_inline(samples: Path) -> None:
    from precdx.collectors.msprobe.executor import DaskExecutor
    tasks = _tasks(samples)
    ex = DaskExecutor(workers=1)
    try:
        assert _digest(ex.map(run_task, tasks)) == _digest(InlineExecutor().map(run_task, tasks))
    finally:
        ex.close()


class _Stream(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self._tty = tty

    def isatty(self) -> bool:
        return self._tty


@pytest.mark.parametrize("tty, quiet, shown", [(True, False, True), (True, True, False), (False, False, False)])
def test_progress_only_on_a_terminal(tty: bool, quiet: bool, shown: bool) -> None:
    s = _Stream(tty)
    p = Progress("msprobe", quiet=quiet, stream=s)
    p.update(1, 2)
    p.update(2, 2)
    p.close()
    assert bool(s.getvalue()) is shown
