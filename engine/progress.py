"""The global quiet switch for progress output: progress lines (the msprobe collector's) appear on
stderr only when it is a terminal and the caller did not ask for quiet output (JSON, pipes)."""
from __future__ import annotations

import sys

_quiet = False


def set_quiet(quiet: bool) -> None:
    global _quiet
    _quiet = quiet


def enabled() -> bool:
    return not _quiet and sys.stderr.isatty()
