"""Baseline replay: re-run a captured step on the reference side with the probe on, so both
sides of that step exist in the case folder (``precdx replay CASE --step N``).

Contract. The watcher saved, for each captured iteration N, the weights and optimizer state
at the start of N (``checkpoint.pt``, or a note naming the training checkpoint to use), the
batch (``batch.pt``) and every RNG state (``rng.pt``) under ``precdx_watch/iterN/``. The user
supplies, as ``module:function`` references (the module importable from the current folder):

- ``--model-fn``: ``function()`` -> ``model`` or ``(model, optimizer)``, built the way the
  reference side builds them (its device, its code); the captured state is loaded into them
  (the optimizer keeps its own hyperparameters, it takes only the per-parameter state);
- ``--step-fn`` (optional): ``function(model, optimizer, batch)`` running the step's forward
  and backward as the training loop does (clipping and the update may follow: they are not
  recorded); default: call the model on the batch and backpropagate the loss it returns;
- ``--batch-fn`` (optional): ``function(iteration, saved_batch)`` -> the batch the reference
  side reads at that iteration (its own data pipeline); default: the watched run's batch.

Nothing named inside the case folder is ever imported or unpickled: the functions come from
the command line, and saved files are read with ``torch.load(weights_only=True)``.
"""
from __future__ import annotations

import importlib
import os
import shutil
import sys
from pathlib import Path
from typing import Any, Callable

from precdx.errors import PrecdxError

FUNCTION_REF = "module:function"


def resolve(ref: str | Callable | None, what: str) -> Callable | None:
    """A callable from ``module:function`` (dotted attributes allowed after the colon)."""
    if ref is None or callable(ref):
        return ref
    module_name, sep, attr = str(ref).partition(":")
    if not sep or not module_name or not attr:
        raise PrecdxError(f"{what} must be given as {FUNCTION_REF}, not {ref!r}")
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise PrecdxError(f"cannot import {module_name!r} for {what}: {exc}",
                          hint="run from the folder that holds the module, or set PYTHONPATH") from None
    for part in attr.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            raise PrecdxError(f"{module_name!r} has no {attr!r} (for {what})")
    if not callable(obj):
        raise PrecdxError(f"{ref} is not callable (for {what})")
    return obj


def _entry(status: dict[str, Any], step: int | None) -> dict[str, Any]:
    captured = [c for c in status.get("captured", []) if isinstance(c, dict) and "iteration" in c]
    if not captured:
        raise PrecdxError("the case has no captured step to replay (no breach, or capture_steps=0)")
    if step is None:
        return captured[0]
    for c in captured:
        if c.get("iteration") == step:
            return c
    raise PrecdxError(f"iteration {step} was not captured; captured: "
                      + ", ".join(str(c["iteration"]) for c in captured))


def _load_state(model: Any, optimizer: Any, state: Any, source: Path, notes: list[str]) -> None:
    if not isinstance(state, dict):
        raise PrecdxError("checkpoint is not a state_dict", path=str(source))
    model_sd = state.get("model", state) if isinstance(state.get("model"), dict) else state
    try:
        missing, unexpected = model.load_state_dict(model_sd, strict=False)
    except RuntimeError as exc:
        raise PrecdxError(f"checkpoint does not fit the model from --model-fn: {str(exc).splitlines()[0]}",
                          path=str(source)) from None
    if missing or unexpected:
        raise PrecdxError(f"checkpoint does not fit the model from --model-fn ({len(missing)} missing, "
                          f"{len(unexpected)} unexpected keys, e.g. {(list(missing) + list(unexpected))[0]})",
                          path=str(source))
    osd = state.get("optimizer") if isinstance(state.get("optimizer"), dict) else None
    if optimizer is None or osd is None:
        return
    own = [{k: v for k, v in g.items() if k != "params"} for g in optimizer.param_groups]
    try:
        optimizer.load_state_dict(osd)
    except (ValueError, KeyError, RuntimeError) as exc:
        notes.append(f"optimizer state not loaded ({exc}); the step's forward and backward do not depend on it")
        return
    for group, settings in zip(optimizer.param_groups, own):
        group.update(settings)  # the reference side's hyperparameters, the watched run's moments


def replay(case_dir: str | Path, step: int | None = None, *, model_fn: Any, step_fn: Any = None,
           batch_fn: Any = None, checkpoint: str | Path | None = None, side: str | None = None,
           quiet: bool = False) -> Path:
    """Replay captured iteration ``step`` (default: the first captured) on the reference side;
    returns the dump folder written (``<side>/msprobe_dump/step{N-1}/rank{R}``)."""
    import torch

    from precdx.watch.capture import (StepRecorder, default_step, from_saved, load_saved, set_rng_state,
                                      write_json)
    from precdx.watch.watcher import load_status

    case = Path(case_dir)
    status = load_status(case)
    entry = _entry(status, step)
    iteration = int(entry["iteration"])
    side = side or (status.get("replay") or {}).get("reference_folder") or "baseline"
    if side not in ("baseline", "target"):
        raise PrecdxError(f"replay side must be baseline or target, not {side!r}")
    if side == status.get("watched_run"):
        raise PrecdxError(f"{side}/ is the watched run itself; replay runs on the reference side")
    model_fn = resolve(model_fn, "--model-fn")
    if model_fn is None:
        raise PrecdxError("replay needs --model-fn (module:function building the reference side's model)")
    fn = resolve(step_fn, "--step-fn") or default_step
    bfn = resolve(batch_fn, "--batch-fn")
    state_dir = case / str(entry.get("state", ""))
    built = model_fn()
    model, optimizer = (built if isinstance(built, tuple) else (built, None))[:2]
    if not isinstance(model, torch.nn.Module):
        raise PrecdxError("--model-fn must return a torch.nn.Module or (module, optimizer)")
    notes: list[str] = []
    ckpt = Path(checkpoint) if checkpoint else (state_dir / entry["checkpoint"] if entry.get("checkpoint") else None)
    if ckpt is None:
        raise PrecdxError("no weights saved for this step: " + str(entry.get("checkpoint_note") or "give --checkpoint"))
    _load_state(model, optimizer, load_saved(ckpt), ckpt, notes)
    device = next((p.device for p in model.parameters()), None)
    saved = from_saved(load_saved(state_dir / entry["batch"]), device) if entry.get("batch") else None
    if bfn is not None:
        batch = bfn(iteration, saved)
    elif saved is not None:
        batch = saved
    else:
        raise PrecdxError("the batch of this step was not saved: " + str(entry.get("batch_note") or "")
                          + "; give --batch-fn")
    set_rng_state(load_saved(state_dir / "rng.pt"))
    model.train()
    for p in model.parameters():
        p.grad = None
    dump_step = iteration - 1
    rank = int(status.get("rank") or 0)
    root = case / side / "msprobe_dump"
    old = root / f"step{dump_step}" / f"rank{rank}"
    if old.is_dir():
        shutil.rmtree(old)
    rec = StepRecorder(model, root, dump_step, summary_mode=status.get("summary_mode") or "statistics",
                       level=status.get("level") or "mix", rank=rank).install()
    try:
        fn(model, optimizer, batch)
    finally:
        dump = rec.finish()
    if dump is None:
        raise PrecdxError("the step function never called the model: nothing was recorded")
    cfg_path = case / side / "msprobe_config.json"
    cfg = rec.config()
    write_json(cfg_path, cfg)
    status.setdefault("replays", [])
    status["replays"] = [r for r in status["replays"] if not (r.get("iteration") == iteration and r.get("side") == side)]
    status["replays"].append({"iteration": iteration, "side": side, "dump": dump.relative_to(case).as_posix(),
                              "model_fn": _name(model_fn), "step_fn": _name(fn), "batch_fn": _name(bfn),
                              "checkpoint": str(ckpt), "notes": notes})
    write_json(case / "watch.json", status)
    if not quiet:
        print(f"precdx replay: iteration {iteration} replayed on {side}/ into {dump}", file=sys.stderr)
    return dump


def _name(fn: Callable | None) -> str | None:
    if fn is None:
        return None
    return f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', getattr(fn, '__name__', '?'))}"
