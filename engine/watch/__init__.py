"""precdx watch: catch a divergence while training runs and capture the evidence that decides it.

Integrations, imported by training scripts from the installed package (``from precdx.watch
import watch, HFWatchCallback``); torch, transformers and lightning are imported only when the
name is used:

- ``watch(model, optimizer, baseline="gpu_run/")``: plain PyTorch loops (context manager;
  ``w.batch(batch)``, ``w.step(loss, grad_norm=...)``);
- ``HFWatchCallback``: a ``transformers.TrainerCallback``;
- ``LightningWatchCallback``: a ``lightning.pytorch.Callback``;
- ``megatron_hook(model, optimizer, baseline=...)``: a function ``hook(iteration, loss,
  grad_norm, loss_scale)`` for Megatron-LM / MindSpeed training loops;
- ``replay(case_dir, step, step_fn=..., model_fn=...)``: re-run a captured step on the
  reference side with the probe on (``precdx replay``).

The checks (``Tolerances``, ``Checker``) are pure Python.
"""
from __future__ import annotations

from typing import Any

_LAZY = {
    "Watcher": "engine.watch.watcher",
    "watch": "engine.watch.watcher",
    "load_status": "engine.watch.watcher",
    "Tolerances": "engine.watch.checks",
    "Checker": "engine.watch.checks",
    "Breach": "engine.watch.checks",
    "Point": "engine.watch.checks",
    "HFWatchCallback": "engine.watch.hf",
    "LightningWatchCallback": "engine.watch.lightning",
    "megatron_hook": "engine.watch.megatron",
    "replay": "engine.watch.replayer",
    "ModelInputs": "engine.watch.capture",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'engine.watch' has no attribute {name!r}")
    import importlib
    return getattr(importlib.import_module(module), name)
