"""Run CPU-bound work (unpacking, collecting, matching) in a bounded thread pool so the event
loop keeps answering other clients, with a time limit per request. A job that overruns is
answered with 408 at once; its thread cannot be killed, so it keeps its slot until it ends and
new work waits for a free slot (503 when none frees up in time)."""
from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

from engine.service.errors import ServiceError


class JobRunner:
    def __init__(self, max_jobs: int, timeout: float) -> None:
        self.max_jobs = max(1, max_jobs)
        self.timeout = timeout
        self._pool: ThreadPoolExecutor | None = None  # made on first use, again after close()
        self._slots: dict[int, asyncio.Semaphore] = {}  # per event loop (tests run several)

    def deadline(self) -> float:
        """time.monotonic() by which work started now must end (jobs that can stop early check it)."""
        return time.monotonic() + self.timeout

    async def run(self, fn: Callable[..., Any], *args: Any, deadline: float | None = None) -> Any:
        loop = asyncio.get_running_loop()
        slots = self._slots.setdefault(id(loop), asyncio.Semaphore(self.max_jobs))
        deadline = deadline if deadline is not None else self.deadline()
        try:
            await asyncio.wait_for(slots.acquire(), max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            raise ServiceError(503, "busy", "all diagnosis slots stayed busy; retry later") from None
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=self.max_jobs, thread_name_prefix="precdx-job")
        future = loop.run_in_executor(self._pool, fn, *args)
        future.add_done_callback(lambda _f: slots.release())
        try:
            return await asyncio.wait_for(asyncio.shield(future), max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            future.add_done_callback(_consume)
            raise ServiceError(408, "timeout", f"the request took longer than {self.timeout:g} s") from None

    def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)


def _consume(future: "asyncio.Future") -> None:
    if not future.cancelled():
        future.exception()  # a late failure of an abandoned job is not an unhandled error
