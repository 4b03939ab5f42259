"""Progress lines for long dump parses: on stderr, only when stderr is a terminal and the caller
did not ask for quiet output (JSON, pipes, tests)."""
from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """Overwrites one stderr line at most ~5 times a second; a no-op when disabled."""

    def __init__(self, label: str, *, quiet: bool = False, stream: TextIO | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        isatty = getattr(self.stream, "isatty", None)
        self.enabled = (not quiet) and bool(isatty and isatty())
        self.label = label
        self._last = 0.0
        self._shown = False

    def update(self, done: float, total: float, unit: str = "") -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._last < 0.2 and done < total:
            return
        self._last = now
        pct = 100.0 * done / total if total else 0.0
        self.stream.write(f"\r{self.label}: {pct:5.1f}% ({done:,.0f}/{total:,.0f}{unit})")
        self.stream.flush()
        self._shown = True

    def close(self) -> None:
        if self.enabled and self._shown:
            self.stream.write("\n")
            self.stream.flush()
