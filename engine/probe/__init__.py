"""Torch probe: msprobe-format (mindstudio-probe 26.2.0) dumps of chosen training steps, a
first-NaN locator and a determinism self-check.

torch is imported only when one of these names is first used, so ``import precdx.probe``
works without torch. Entry points: ``Probe`` (start/stop/step or ``with probe.capture():``),
``locate_first_nan(model, step_fn)``, ``check_determinism(model, step_fn, optimizer)``, all
imported from the installed package: ``from precdx.probe import Probe``.
"""
from __future__ import annotations

from typing import Any

_LAZY = {
    "Probe": "precdx.probe.recorder",
    "StepRecord": "precdx.probe.recorder",
    "locate_first_nan": "precdx.probe.nan_locator",
    "NanOrigin": "precdx.probe.nan_locator",
    "check_determinism": "precdx.probe.determinism",
    "DeterminismReport": "precdx.probe.determinism",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'precdx.probe' has no attribute {name!r}")
    import importlib
    return getattr(importlib.import_module(module), name)
