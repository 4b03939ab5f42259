"""Emulated target ("NPU") numerics: what makes the target differ from the baseline.

Every target carries tiny seeded noise on matmul-class outputs (~1e-6 relative), because two
devices never agree bit for bit; a fault adds one defect on top. Both act by swapping the
callables in torch's namespaces for the duration of the run, so the model code is the same
on both sides and the probe (which wraps whatever is installed when it starts) reports the
defect under the real API name. Perturbations go through ``.data`` so the autograd graph,
and hence every backward entry's layout, is the same as the baseline's.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator

import torch
import torch.nn.functional as F

CROSS_DEVICE_REL_NOISE = 1e-6
NONDETERMINISTIC_REL_NOISE = 1e-6


@dataclass
class DeviceProfile:
    """How one run computes: ``target`` enables cross-device noise; ``fault`` one defect.

    ``noise_seed`` fixes the cross-device noise (same on every target launch);
    ``launch_seed`` differs per launch and only feeds the nondeterministic-op fault.
    """

    target: bool
    fault: str | None = None
    noise_seed: int = 0
    launch_seed: int = 0
    nan_step: int | None = None
    step: int = 0


def _perturb(out: torch.Tensor, rel: float, generator: torch.Generator) -> torch.Tensor:
    noise = torch.randn(out.shape, generator=generator, dtype=out.dtype)
    out.data.mul_(1.0 + rel * noise)
    return out


@contextmanager
def device_numerics(profile: DeviceProfile) -> Iterator[DeviceProfile]:
    """Install the profile's operator implementations; the baseline installs nothing."""
    if not profile.target:
        yield profile
        return
    noise_gen = torch.Generator()
    launch_gen = torch.Generator()
    seeded_for: list[int | None] = [None]
    originals: dict[tuple[object, str], Callable] = {}

    def at_step() -> None:
        # noise is a function of (seed, step, call order within the step), as a deterministic
        # kernel's output is a function of its inputs: a replay of one step from the same state
        # reproduces the run's noise, and only the launch-seeded part changes between launches
        if seeded_for[0] != profile.step:
            seeded_for[0] = profile.step
            noise_gen.manual_seed(profile.noise_seed * 1_000_003 + profile.step)
            launch_gen.manual_seed(profile.launch_seed * 1_000_003 + profile.step)

    def install(owner: object, name: str, make: Callable[[Callable], Callable]) -> None:
        original = getattr(owner, name)
        originals[(owner, name)] = original
        setattr(owner, name, make(original))

    def noisy_linear(orig):
        def linear(input, weight, bias=None):
            at_step()
            return _perturb(orig(input, weight, bias), CROSS_DEVICE_REL_NOISE, noise_gen)
        return linear

    def noisy_matmul(orig):
        def matmul(input, other, *, out=None):
            at_step()
            result = _perturb(orig(input, other), CROSS_DEVICE_REL_NOISE, noise_gen)
            if profile.fault == "nondeterministic_op":
                # accumulation order depends on the launch: seeded per launch, not per job
                _perturb(result, NONDETERMINISTIC_REL_NOISE, launch_gen)
            return result
        return matmul

    def defective_gelu(orig):
        def gelu(input, approximate="none"):
            # fast tanh-form kernel evaluated in half precision that drops the formula's 0.5
            # factor: outputs about twice the true value, gradients taken from the true gelu
            with torch.no_grad():
                h = input.half()
                approx = (h * (1.0 + torch.tanh(0.7978845608 * (h + 0.044715 * h * h * h)))).float()
            out = orig(input, approximate=approximate)
            out.data.copy_(approx)
            return out
        return gelu

    def nan_softmax(orig):
        def softmax(input, dim=None, _stacklevel=3, dtype=None):
            out = orig(input, dim=dim, _stacklevel=_stacklevel, dtype=dtype)
            if profile.nan_step is not None and profile.step == profile.nan_step:
                out.data[0, 0, -1, :] = float("nan")  # one attention row of the bad input
            return out
        return softmax

    install(F, "linear", noisy_linear)
    install(torch, "matmul", noisy_matmul)
    if profile.fault == "operator_defect":
        install(F, "gelu", defective_gelu)
    if profile.fault == "nan_op":
        install(F, "softmax", nan_softmax)
    try:
        yield profile
    finally:
        for (owner, name), original in reversed(list(originals.items())):
            setattr(owner, name, original)
