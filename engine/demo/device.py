"""Emulated target ("NPU") numerics: what makes the target differ from the baseline.

Every target carries tiny seeded noise on matmul-class outputs (~1e-6 relative), because two
devices never agree bit for bit; a fault adds one defect on top. Both act by swapping the
callables in torch's namespaces for the duration of the run, so the model code is the same
on both sides and the probe (which wraps whatever is installed when it starts) reports the
defect under the real API name. Perturbations go through ``.data`` so the autograd graph,
and hence every backward entry's layout, is the same as the baseline's.
"""
from __future__ import annotations

import random
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator

import torch
import torch.nn.functional as F

CROSS_DEVICE_REL_NOISE = 1e-6
NONDETERMINISTIC_REL_NOISE = 1e-6
# operators a concurrent stream may overwrite (memory stomping): where the NaN lands
STOMP_SITES = ("linear", "gelu", "softmax", "layer_norm")
_EMBEDDING = F.embedding   # the real lookup, whatever a run patches in later


@dataclass
class DeviceProfile:
    """How one run computes: ``target`` enables cross-device noise; ``fault`` one defect.

    ``noise_seed`` fixes the cross-device noise (same on every target launch);
    ``launch_seed`` differs per launch and feeds what changes between launches (the
    nondeterministic op, the place a memory stomp lands). ``operator`` / ``strength`` /
    ``variant`` refine the fault (None: the classic demo fault); ``nan_step`` is the iteration
    (0-based) a one-off fault fires at and ``nan_call`` which call of the operator it hits.
    """

    target: bool
    fault: str | None = None
    noise_seed: int = 0
    launch_seed: int = 0
    nan_step: int | None = None
    step: int = 0
    operator: str | None = None
    strength: float | None = None
    variant: str | None = None
    nan_call: int | None = None       # None: every call of the operator at nan_step (a re-run of the
                                      # step, as the watcher makes, fires again)
    vocab: int | None = None          # rows of the word embeddings (input_id_out_of_range: the
                                      # rows from here on are padding)
    overflow_now: bool = False        # loss_scale_collapse (kernel variant): this iteration overflows


class _OverflowInBackward(torch.autograd.Function):
    """Identity forward; the backward writes +inf into the gradient it passes on (an fp16
    kernel overflowing in backward)."""

    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        out = grad.clone()
        out.view(-1)[0] = float("inf")
        return out


class _NoisyEmbeddingGrad(torch.autograd.Function):
    """Embedding lookup whose weight gradient is accumulated in bf16 with a growing error."""

    @staticmethod
    def forward(ctx, ids, weight, rel, seed):
        ctx.save_for_backward(ids)
        ctx.shape = weight.shape
        ctx.rel = rel
        ctx.seed = seed
        return _EMBEDDING(ids, weight)

    @staticmethod
    def backward(ctx, grad):
        (ids,) = ctx.saved_tensors
        g = torch.zeros(ctx.shape, dtype=grad.dtype)
        g.index_add_(0, ids.reshape(-1), grad.reshape(-1, grad.shape[-1]))
        if ctx.rel > 0:
            # the accumulator's rounding grows the rows it keeps adding into and scatters the rest
            gen = torch.Generator().manual_seed(ctx.seed)
            rms = g.pow(2).mean().sqrt()
            g = g * (1.0 + ctx.rel) + torch.randn(g.shape, generator=gen) * rms * ctx.rel
        return None, g.to(torch.bfloat16).to(grad.dtype), None, None


def bf16_grad_error(profile: DeviceProfile, steps: int) -> float:
    """Relative error of the bf16-accumulated embedding gradient at the profile's step: zero
    before the fault's onset, 8 % x strength there, then growing quadratically to ~4 x strength at
    the last step."""
    start = profile.nan_step if profile.nan_step is not None else 0
    if profile.step < start:
        return 0.0
    span = max(1, steps - start)
    return (profile.strength or 1.0) * (0.08 + 4.0 * ((profile.step - start) / span) ** 2)


def _perturb(out: torch.Tensor, rel: float, generator: torch.Generator) -> torch.Tensor:
    noise = torch.randn(out.shape, generator=generator, dtype=torch.float32).to(out.dtype)
    out.data.mul_(1.0 + rel * noise)
    return out


def _nan_rows(out: torch.Tensor) -> None:
    """One row (the last dimension) of the output becomes NaN: a kernel's bad block."""
    out.data.view(-1, out.shape[-1])[0] = float("nan")


def stomp_site(launch_seed: int, layers: int) -> tuple[str, int]:
    """Where a memory stomp lands in one launch: (operator, call index within the step)."""
    rnd = random.Random(f"stomp:{launch_seed}")
    op = rnd.choice(STOMP_SITES)
    calls = {"linear": 4 * layers + 1, "gelu": layers, "softmax": layers, "layer_norm": 2 * layers + 1}[op]
    return op, rnd.randrange(calls)


@contextmanager
def device_numerics(profile: DeviceProfile, *, layers: int = 2, steps: int = 40) -> Iterator[DeviceProfile]:
    """Install the profile's operator implementations; the baseline installs nothing."""
    if not profile.target:
        yield profile
        return
    noise_gen = torch.Generator()
    launch_gen = torch.Generator()
    seeded_for: list[int | None] = [None]
    calls: dict[str, int] = {}
    originals: dict[tuple[object, str], Callable] = {}
    fault, op, strength = profile.fault, profile.operator, profile.strength
    stomp = stomp_site(profile.launch_seed, layers) if fault == "memory_stomp" else None

    def at_step() -> None:
        # noise is a function of (seed, step, call order within the step), as a deterministic
        # kernel's output is a function of its inputs: a replay of one step from the same state
        # reproduces the run's noise, and only the launch-seeded part changes between launches
        if seeded_for[0] != profile.step:
            seeded_for[0] = profile.step
            calls.clear()
            noise_gen.manual_seed(profile.noise_seed * 1_000_003 + profile.step)
            launch_gen.manual_seed(profile.launch_seed * 1_000_003 + profile.step)

    def count(name: str) -> int:
        at_step()
        n = calls.get(name, 0)
        calls[name] = n + 1
        return n

    def fires(name: str, n: int) -> bool:
        """This call is where a one-off NaN lands (nan_op, memory_stomp)."""
        if profile.nan_step is None or profile.step != profile.nan_step:
            return False
        if fault == "nan_op":
            return name == (op or "softmax") and (profile.nan_call is None or n == profile.nan_call)
        if fault == "memory_stomp":
            return stomp == (name, n)
        return False

    def install(owner: object, name: str, make: Callable[[Callable], Callable]) -> None:
        original = getattr(owner, name)
        originals[(owner, name)] = original
        setattr(owner, name, make(original))

    def noisy_linear(orig):
        def linear(input, weight, bias=None):
            n = count("linear")
            out = _perturb(orig(input, weight, bias), CROSS_DEVICE_REL_NOISE, noise_gen)
            if fires("linear", n):
                _nan_rows(out)
            if fault == "loss_scale_collapse" and profile.overflow_now and n == 0:
                out = _OverflowInBackward.apply(out)
            return out
        return linear

    def noisy_matmul(orig):
        def matmul(input, other, *, out=None):
            count("matmul")
            result = _perturb(orig(input, other), CROSS_DEVICE_REL_NOISE, noise_gen)
            if fault == "nondeterministic_op" and (op or "matmul") == "matmul":
                # accumulation order depends on the launch: seeded per launch, not per job
                _perturb(result, strength or NONDETERMINISTIC_REL_NOISE, launch_gen)
            return result
        return matmul

    def gelu_op(orig):
        def gelu(input, approximate="none"):
            n = count("gelu")
            out = orig(input, approximate=approximate)
            if fault == "operator_defect" and op == "gelu":
                with torch.no_grad():
                    if strength is None:
                        # fast tanh-form kernel evaluated in half precision that drops the
                        # formula's 0.5 factor: outputs about twice the true value
                        h = input.half()
                        approx = (h * (1.0 + torch.tanh(0.7978845608 * (h + 0.044715 * h * h * h)))).float()
                    else:
                        approx = out * (1.0 + strength)
                out.data.copy_(approx)
            if fires("gelu", n):
                _nan_rows(out)
            return out
        return gelu

    def softmax_op(orig):
        def softmax(input, dim=None, _stacklevel=3, dtype=None):
            n = count("softmax")
            out = orig(input, dim=dim, _stacklevel=_stacklevel, dtype=dtype)
            if fault == "operator_defect" and op == "softmax":
                with torch.no_grad():   # the kernel applies a wrong temperature
                    out.data.copy_(orig(input * (1.0 + (strength or 0.5)), dim=dim, dtype=dtype))
            if fault == "nondeterministic_op" and op == "softmax":
                _perturb(out, strength or NONDETERMINISTIC_REL_NOISE, launch_gen)
            if fires("softmax", n):
                if fault == "nan_op" and strength is None:
                    out.data[0, 0, -1, :] = float("nan")  # one attention row of the bad input
                else:
                    _nan_rows(out)
            return out
        return softmax

    def layer_norm_op(orig):
        def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
            n = count("layer_norm")
            out = orig(input, normalized_shape, weight, bias, eps)
            if fault == "operator_defect" and op == "layer_norm":
                with torch.no_grad():   # the kernel's rsqrt approximation is off by a factor
                    out.data.mul_(1.0 + 0.5 * (strength or 0.5))
            if fires("layer_norm", n):
                _nan_rows(out)
            return out
        return layer_norm

    def embedding_op(orig):
        def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
                      scale_grad_by_freq=False, sparse=False):
            count("embedding")
            if fault == "bf16_embedding_grad" and weight.shape[0] == profile.vocab and weight.requires_grad:
                rel = bf16_grad_error(profile, steps)
                return _NoisyEmbeddingGrad.apply(input, weight, rel, profile.noise_seed * 7919 + profile.step)
            out = orig(input, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse)
            if fault == "input_id_out_of_range" and profile.vocab is not None:
                with torch.no_grad():   # padded rows come back as whatever the memory held
                    beyond = input >= profile.vocab
                    if bool(beyond.any()):
                        g = torch.Generator().manual_seed(profile.noise_seed + 31 * profile.step)
                        garbage = torch.randn(out.shape, generator=g) * 3.0
                        out.data[beyond] = garbage[beyond]
            return out
        return embedding

    install(F, "linear", noisy_linear)
    install(torch, "matmul", noisy_matmul)
    needs = {"operator_defect": (op,), "nan_op": (op or "softmax",), "nondeterministic_op": (op,),
             "memory_stomp": (stomp[0] if stomp else None,),
             "bf16_embedding_grad": ("embedding",), "input_id_out_of_range": ("embedding",)}
    wanted = set(needs.get(fault or "", ()))
    if fault == "operator_defect" and op is None:
        wanted.add("gelu")
        op = "gelu"
    if "gelu" in wanted:
        install(F, "gelu", gelu_op)
    if "softmax" in wanted:
        install(F, "softmax", softmax_op)
    if "layer_norm" in wanted:
        install(F, "layer_norm", layer_norm_op)
    if "embedding" in wanted:
        install(F, "embedding", embedding_op)
    try:
        yield profile
    finally:
        for (owner, name), original in reversed(list(originals.items())):
            setattr(owner, name, original)
