"""First-NaN locator: run one step under the probe and stop at the first op whose output is
non-finite, reporting the op, its inputs' statistics, the enclosing module and the user's line."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch

from precdx.probe.recorder import NonFiniteFound, Probe


@dataclass
class NanOrigin:
    """Where a step first produced NaN/inf.

    ``api`` is the msprobe entry name (``Functional.softmax.0.forward``); ``inputs_finite``
    says whether the op was fed finite values (an operator origin) or already carried
    NaN/inf in (a parameter or an unhooked op upstream); ``entry`` is the dump.json body of
    that call (input stats and output stats); ``code_line`` the user's frame.
    """

    api: str
    step: int
    inputs_finite: bool
    module: str | None
    code_line: str | None
    entry: dict[str, Any]
    stack: list[str]


def locate_first_nan(model: torch.nn.Module | None, step_fn: Callable[[], Any], *,
                     step: int = 0, level: str = "mix") -> NanOrigin | None:
    """Run ``step_fn`` (one forward/backward) and return where NaN/inf first appeared, or None.

    The step is aborted at the first non-finite output, so later ops (and the optimizer
    update, if ``step_fn`` includes it) do not run when something was found.
    """
    probe = Probe(model, None, level=level if model is not None else "L1",
                  stop_at_nonfinite=True, steps=None)
    probe.current_step = step
    probe.start()
    try:
        step_fn()
    except NonFiniteFound:
        pass
    except RuntimeError:
        # autograd re-raises hook exceptions as RuntimeError; anything else is the user's
        if probe.first_nonfinite is None:
            raise
    finally:
        probe.stop()
    found = probe.first_nonfinite
    if found is None:
        return None
    return NanOrigin(api=found["api"], step=found["step"], inputs_finite=found["inputs_finite"],
                     module=found["module"], code_line=found["code_line"], entry=found["entry"],
                     stack=found["stack"])
