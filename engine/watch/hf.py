"""precdx watch for the Hugging Face ``Trainer``: a ``TrainerCallback``.

    trainer = Trainer(model=model, args=args, train_dataset=ds,
                      callbacks=[HFWatchCallback(baseline="gpu_run/", out="precdx-watch")])

Checks the values the Trainer logs (``logging_steps``: loss averaged over the logging window,
grad norm, learning rate) against the reference's logged values at the same global step, so
it adds no device synchronisation of its own. The TrainingArguments become the watched run's
``training_config.json``. Replay: the saved batch is the keyword inputs of ``model(**inputs)``;
``--step-fn precdx.watch.hf:trainer_step`` repeats the Trainer's default ``training_step`` on one
process (the same calls between forward and backward), and ``--model-fn`` should build the model as the Trainer runs it (it sets ``model.config.use_cache``
from ``TrainingArguments.use_cache``, False by default, which changes the mask code path).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from transformers import TrainerCallback

from precdx.watch.capture import ModelInputs
from precdx.watch.watcher import Watcher


def trainer_step(model: Any, optimizer: Any, batch: Any) -> Any:
    """Replay step function: transformers' default ``compute_loss`` + ``training_step`` on one
    process (no label smoother, no custom loss, no gradient accumulation scaling)."""
    inputs = dict(batch.kwargs) if isinstance(batch, ModelInputs) else dict(batch)
    outputs = model(**inputs)
    loss = outputs["loss"] if isinstance(outputs, Mapping) else outputs[0]
    if inputs.get("num_items_in_batch") is not None:
        loss *= 1  # the Trainer rescales by the number of processes when averaging tokens across them
    (loss / 1).backward()  # accelerate's backward divides by its gradient accumulation steps
    return loss.detach()


class HFWatchCallback(TrainerCallback):
    """Keyword arguments are those of ``precdx.watch.Watcher`` (baseline, rerun_of, out,
    on_breach, capture_steps, tolerances, ...)."""

    def __init__(self, baseline: Any = None, **watch_kwargs: Any) -> None:
        self.kwargs = dict(baseline=baseline, **watch_kwargs)
        self.watcher: Watcher | None = None

    def on_train_begin(self, args, state, control, model=None, optimizer=None, **kwargs):
        kw = dict(self.kwargs)
        kw.setdefault("config", args)
        kw.setdefault("total_steps", state.max_steps or None)
        kw.setdefault("framework", "hf_trainer")
        kw.setdefault("step_fn", trainer_step)
        kw.setdefault("replay_hint", {"step_fn": "precdx.watch.hf:trainer_step"})
        self.watcher = Watcher(model, optimizer, **kw)
        return control

    def on_step_end(self, args, state, control, **kwargs):
        if self.watcher is not None:
            self.watcher.end_step()
        return control

    def on_log(self, args, state, control, logs=None, **kwargs):
        if self.watcher is None or not logs or "loss" not in logs:
            return control
        if self.watcher.observe(state.global_step, logs["loss"], logs.get("grad_norm"),
                                lr=logs.get("learning_rate"), averaged=True):
            control.should_training_stop = True
        return control

    def on_train_end(self, args, state, control, **kwargs):
        if self.watcher is not None:
            self.watcher.close()
        return control
