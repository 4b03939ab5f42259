"""Determinism self-check: run the same step twice from the same state (model, optimizer and
RNG restored) with CRC-32 ("md5") summaries, and name the first API whose inputs were equal
and whose output was not."""
from __future__ import annotations

import copy
import random
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from precdx.probe.recorder import Probe


@dataclass
class DeterminismReport:
    """Outcome of ``check_determinism``.

    ``deterministic`` is True when every API and module entry of the two runs has the same
    checksums. ``first_api`` is the first entry (in execution order) whose inputs matched and
    whose outputs did not: the op that introduced run-to-run variation. ``differing`` lists
    every entry that differs in any tensor (most are downstream of ``first_api``).
    """

    deterministic: bool
    first_api: str | None
    differing: list[str] = field(default_factory=list)
    compared: int = 0


def _checksums(value: Any) -> list[str | None]:
    if isinstance(value, dict):
        if value.get("type") == "torch.Tensor":
            return [value.get("md5")]
        if "type" in value and "value" in value:
            return [repr(value["value"])]
        return [c for k in sorted(value) for c in _checksums(value[k])]
    if isinstance(value, list):
        return [c for v in value for c in _checksums(v)]
    return [repr(value)]


def _split(entry: dict[str, Any]) -> tuple[list, list]:
    if "input_args" in entry:
        ins = _checksums(entry.get("input_args")) + _checksums(entry.get("input_kwargs")) \
            + _checksums(entry.get("parameters"))
        return ins, _checksums(entry.get("output"))
    if "input" in entry:
        return _checksums(entry.get("input")), _checksums(entry.get("output"))
    return [], _checksums(entry)  # parameters_grad: only produced values


class _State:
    """Snapshot of everything a training step reads: weights, optimizer, RNGs."""

    def __init__(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer | None) -> None:
        self.model = copy.deepcopy(model.state_dict())
        self.optimizer = copy.deepcopy(optimizer.state_dict()) if optimizer is not None else None
        self.torch_rng = torch.get_rng_state()
        self.py_rng = random.getstate()
        try:
            import numpy as np
            self.np_rng = np.random.get_state()
        except ImportError:  # numpy is optional for torch
            self.np_rng = None

    def restore(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer | None) -> None:
        model.load_state_dict(self.model)
        if optimizer is not None and self.optimizer is not None:
            optimizer.load_state_dict(self.optimizer)
        for p in model.parameters():
            p.grad = None
        torch.set_rng_state(self.torch_rng)
        random.setstate(self.py_rng)
        if self.np_rng is not None:
            import numpy as np
            np.random.set_state(self.np_rng)


def check_determinism(model: torch.nn.Module, step_fn: Callable[[], Any],
                      optimizer: torch.optim.Optimizer | None = None, *,
                      level: str = "mix") -> DeterminismReport:
    """Run ``step_fn`` twice from the same state and compare per-API checksums.

    Leaves model, optimizer and RNGs as they were before the check (it does not advance
    training), so it can be dropped into a loop at any step.
    """
    state = _State(model, optimizer)
    records = []
    for _ in range(2):
        state.restore(model, optimizer)
        probe = Probe(model, None, level=level, summary_mode="md5")
        with probe.capture():
            step_fn()
        records.append(probe.records[-1].data)
    state.restore(model, optimizer)

    first_run, second_run = records
    differing: list[str] = []
    first_api: str | None = None
    for name, entry in first_run.items():
        other = second_run.get(name)
        if other is None:
            differing.append(name)
            continue
        ins_a, outs_a = _split(entry)
        ins_b, outs_b = _split(other)
        if ins_a == ins_b and outs_a == outs_b:
            continue
        differing.append(name)
        if first_api is None and ins_a == ins_b:
            first_api = name
    differing += [n for n in second_run if n not in first_run]
    return DeterminismReport(deterministic=not differing, first_api=first_api,
                             differing=differing, compared=len(first_run))
