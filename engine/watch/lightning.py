"""precdx watch for Lightning: a ``lightning.pytorch.Callback``.

    trainer = L.Trainer(callbacks=[LightningWatchCallback(baseline="gpu_run/")], ...)

Checks the loss ``training_step`` returns and, when the module logs one, the grad norm
(``self.log("grad_norm", ...)``; key set by ``grad_norm_key``) at each optimizer step
(``trainer.global_step``), at the steps the reference logged. The module's ``hparams`` become
the watched run's ``training_config.json``; the batch handed to ``training_step`` is what a
replay feeds ``lightning_step`` (the replay step function for Lightning modules). Recording
starts at the module's first ``forward`` of the step, so ``training_step`` should call it.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import lightning.pytorch as pl

from precdx.watch.watcher import Watcher


def lightning_step(model: Any, optimizer: Any, batch: Any) -> Any:
    """Replay step function for LightningModules: ``training_step``, then backward as Lightning's
    automatic optimisation runs it (the loss divided by ``accumulate_grad_batches``, 1 here)."""
    out = model.training_step(batch, 0)
    loss = out["loss"] if isinstance(out, Mapping) else out
    (loss / 1).backward()
    return loss


class LightningWatchCallback(pl.Callback):
    """Keyword arguments are those of ``precdx.watch.Watcher``."""

    def __init__(self, baseline: Any = None, *, grad_norm_key: str = "grad_norm", **watch_kwargs: Any) -> None:
        super().__init__()
        self.kwargs = dict(baseline=baseline, **watch_kwargs)
        self.grad_norm_key = grad_norm_key
        self.watcher: Watcher | None = None
        self._last = -1

    def on_train_start(self, trainer, pl_module):
        kw = dict(self.kwargs)
        kw.setdefault("config", dict(pl_module.hparams))
        kw.setdefault("total_steps", trainer.max_steps if trainer.max_steps and trainer.max_steps > 0 else None)
        kw.setdefault("framework", "lightning")
        kw.setdefault("step_fn", lightning_step)
        kw.setdefault("replay_hint", {"step_fn": "precdx.watch.lightning:lightning_step"})
        optimizer = trainer.optimizers[0] if trainer.optimizers else None
        self.watcher = Watcher(pl_module, optimizer, **kw)
        self._last = trainer.global_step

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if self.watcher is not None:
            self.watcher.begin_step(batch)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        w = self.watcher
        if w is None or trainer.global_step == self._last:
            return  # an accumulation micro-batch: the optimizer step has not happened yet
        self._last = trainer.global_step
        loss = outputs.get("loss") if isinstance(outputs, Mapping) else outputs
        gn = trainer.callback_metrics.get(self.grad_norm_key)
        if w.observe(trainer.global_step, loss, gn):
            trainer.should_stop = True
        w.end_step()

    def on_train_end(self, trainer, pl_module):
        if self.watcher is not None:
            self.watcher.close()
