"""Running per-rank dump tasks: inline, in a local process pool, or on a Dask cluster.

The interface is one method, `map(fn, tasks) -> iterator of results in task order`, so dumps of
thousands of ranks can move to an existing cluster engine without touching the analysis. `fn`
must be a picklable top-level function and tasks/results plain data.
"""
from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from typing import Callable, Iterable, Iterator, Protocol, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class Executor(Protocol):
    def map(self, fn: Callable[[T], R], tasks: Iterable[T]) -> Iterator[R]:
        """Results of fn(task) for every task, in task order."""


class InlineExecutor:
    """Runs tasks one after another in this process (one task, tests, no fork allowed)."""

    def map(self, fn: Callable[[T], R], tasks: Iterable[T]) -> Iterator[R]:
        for t in tasks:
            yield fn(t)


class LocalProcessExecutor:
    """A pool of worker processes on this machine, one per core by default; falls back to
    inline for a single task (a process start costs more than a small dump)."""

    def __init__(self, workers: int | None = None) -> None:
        self.workers = max(1, workers or cpu_count())

    def map(self, fn: Callable[[T], R], tasks: Iterable[T]) -> Iterator[R]:
        items = list(tasks)
        if len(items) <= 1 or self.workers == 1:
            yield from InlineExecutor().map(fn, items)
            return
        with ProcessPoolExecutor(max_workers=min(self.workers, len(items))) as pool:
            yield from pool.map(fn, items)


class DaskExecutor:
    """Submits tasks to a Dask cluster (`address`, e.g. PRECDX_DASK_SCHEDULER=tcp://host:8786),
    or a local one started on demand (`workers` processes, or threads with processes=False)."""

    def __init__(self, address: str | None = None, *, workers: int = 2, processes: bool = True) -> None:
        from dask.distributed import Client, LocalCluster  # optional dependency, imported lazily
        if address:
            self._client = Client(address)
            self._cluster = None
        else:
            self._cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=processes,
                                         dashboard_address=None)
            self._client = Client(self._cluster)

    def map(self, fn: Callable[[T], R], tasks: Iterable[T]) -> Iterator[R]:
        futures = self._client.map(fn, list(tasks), pure=False)
        for fut in futures:
            yield fut.result()

    def close(self) -> None:
        self._client.close()
        if self._cluster is not None:
            self._cluster.close()


def cpu_count() -> int:
    """The cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def dask_available() -> bool:
    try:
        import dask.distributed  # noqa: F401
    except Exception:
        return False
    return True


def default_executor() -> Executor:
    """The executor the collector uses: PRECDX_DASK_SCHEDULER=<address> selects a Dask cluster,
    PRECDX_WORKERS=<n> sizes the local pool."""
    address = os.environ.get("PRECDX_DASK_SCHEDULER")
    if address and dask_available():
        return DaskExecutor(address)
    workers = os.environ.get("PRECDX_WORKERS")
    return LocalProcessExecutor(int(workers) if workers and workers.isdigit() else None)
