"""Progress on stderr for long parses: shown only when stderr is a terminal and the caller did
not ask for quiet output (JSON for bots, pipes)."""
from __future__ import annotations

import sys
import time
from typing import Iterable, Iterator, TypeVar

T = TypeVar("T")
_quiet = False


def set_quiet(quiet: bool) -> None:
    global _quiet
    _quiet = quiet


def enabled() -> bool:
    return not _quiet and sys.stderr.isatty()


def progress(items: Iterable[T], label: str, total: int | None = None) -> Iterator[T]:
    """Yield items, drawing `label i/total` on stderr at most 5 times a second when enabled."""
    if not enabled():
        yield from items
        return
    last = 0.0
    i = 0
    for i, item in enumerate(items, 1):
        now = time.monotonic()
        if now - last > 0.2:
            sys.stderr.write(f"\r{label} {i}" + (f"/{total}" if total else "") + " ")
            sys.stderr.flush()
            last = now
        yield item
    sys.stderr.write(f"\r{label} {i}" + (f"/{total}" if total else "") + " done\n")
    sys.stderr.flush()
