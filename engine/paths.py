"""Where the packaged rule pack and knowledge base live: the checkout's `rules/` and `kb/`
next to the `engine` package, or `engine/_pack/` inside an installed wheel."""
from __future__ import annotations

import os
from pathlib import Path

_ENGINE = Path(__file__).resolve().parent


def _find(name: str) -> Path:
    env = os.environ.get(f"PRECDX_{name.upper()}_DIR")
    if env:
        return Path(env)
    checkout = _ENGINE.parent / name
    if checkout.is_dir():
        return checkout
    return _ENGINE / "_pack" / name


def rules_dir() -> Path:
    return _find("rules")


def kb_dir() -> Path:
    return _find("kb")
