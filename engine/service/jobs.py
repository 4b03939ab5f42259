"""Run CPU-bound work (unpacking, collecting, matching) in a bounded thread pool so the event
loop keeps answering other clients, with a time limit per request.

`max_jobs` slots per worker process. A job that overruns is answered with 408 at once and gives
its slot back at once: its thread cannot be killed, so it runs on in the background as an
abandoned job (logged when it ends), on one of `max_jobs` spare threads, and the next request
finds a free slot and a free thread. Only when all spare threads are taken by abandoned jobs does
a timed-out job keep its slot until it ends, so the threads busy at once never exceed
2 x `max_jobs`. New work waits for a free slot until its own deadline (503 `busy`)."""
from __future__ import annotations

import asyncio
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

from precdx.service.errors import ServiceError

log = logging.getLogger("precdx.service")


class JobRunner:
    def __init__(self, max_jobs: int, timeout: float, max_abandoned: int | None = None) -> None:
        self.max_jobs = max(1, max_jobs)
        self.timeout = timeout
        self.max_abandoned = self.max_jobs if max_abandoned is None else max(0, max_abandoned)
        self._pool: ThreadPoolExecutor | None = None  # made on first use, again after close()
        self._slots: dict[int, asyncio.Semaphore] = {}  # per event loop (tests run several)
        self._lock = threading.Lock()
        self._abandoned = 0

    @property
    def abandoned(self) -> int:
        """Timed-out jobs still running in the background."""
        return self._abandoned

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
            raise ServiceError(503, "busy", "all diagnosis slots stayed busy; retry later",
                               headers={"Retry-After": "5"}) from None
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=self.max_jobs + self.max_abandoned,
                                            thread_name_prefix="precdx-job")
        started = time.monotonic()
        try:
            future = loop.run_in_executor(self._pool, fn, *args)
        except BaseException:
            slots.release()
            raise
        try:
            result = await asyncio.wait_for(asyncio.shield(future), max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            self._abandon(future, slots, started, getattr(fn, "__name__", "job"))
            raise ServiceError(408, "timeout", f"the request took longer than {self.timeout:g} s") from None
        except BaseException:
            if future.done():
                slots.release()
            else:  # the request was cancelled (client gone, shutdown): the job still holds a thread
                self._abandon(future, slots, started, getattr(fn, "__name__", "job"))
            raise
        slots.release()
        return result

    def _abandon(self, future: "asyncio.Future", slots: asyncio.Semaphore, started: float, name: str) -> None:
        with self._lock:
            spare = self._abandoned < self.max_abandoned
            if spare:
                self._abandoned += 1
        if spare:
            slots.release()  # the slot is free again; the job keeps one of the spare threads

        def ended(f: "asyncio.Future") -> None:
            if spare:
                with self._lock:
                    self._abandoned -= 1
            else:
                slots.release()
            if not f.cancelled():
                f.exception()  # a late failure of an abandoned job is not an unhandled error
            log.info("a timed-out %s ended in the background after %.1f s", name, time.monotonic() - started)

        future.add_done_callback(ended)

    def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
