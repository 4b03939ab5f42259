"""Where the packaged rule pack and knowledge base live: the checkout's `rules/` and `kb/`
next to the engine/ folder, or `precdx/_pack/` inside an installed wheel."""
from __future__ import annotations

import os
from pathlib import Path

_ENGINE = Path(__file__).resolve().parent


def _find(name: str) -> Path:
    env = os.environ.get(f"PRECDX_{name.upper()}_DIR")
    if env:
        return Path(env)
    packed = _ENGINE / "_pack" / name
    checkout = _ENGINE.parent / name
    # the wheel's own copy first: in site-packages, a `rules/` or `kb/` beside the package
    # would belong to some other distribution (as kb.find_kb_dir does)
    if not packed.is_dir() and checkout.is_dir():
        return checkout
    return packed


def rules_dir() -> Path:
    return _find("rules")


def kb_dir() -> Path:
    return _find("kb")
