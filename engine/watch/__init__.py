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
    "Watcher": "precdx.watch.watcher",
    "watch": "precdx.watch.watcher",
    "load_status": "precdx.watch.watcher",
    "Tolerances": "precdx.watch.checks",
    "Checker": "precdx.watch.checks",
    "Breach": "precdx.watch.checks",
    "Point": "precdx.watch.checks",
    "HFWatchCallback": "precdx.watch.hf",
    "LightningWatchCallback": "precdx.watch.lightning",
    "megatron_hook": "precdx.watch.megatron",
    "replay": "precdx.watch.replayer",
    "ModelInputs": "precdx.watch.capture",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'precdx.watch' has no attribute {name!r}")
    import importlib
    return getattr(importlib.import_module(module), name)
