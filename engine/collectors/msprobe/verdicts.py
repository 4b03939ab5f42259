"""Comparing one API call of two dumps: per-tensor relative errors, hard mismatches (dtype,
shape, scalar argument, checksum, NaN/Inf on one side) and a verdict comparable to msprobe
compare's Result column (thresholds from msprobe 26.2.0, see kb-reference section 6)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from precdx.collectors.msprobe.entries import Entry, TensorInfo

# msprobe statistics rules: input NormRelativeErr < 0.1 and output > 0.5 -> error;
# output / input > 10 (or input 0 and output > 0.1) -> warning.
MSPROBE_IN_MAX = 0.1
MSPROBE_OUT_ERROR = 0.5
MSPROBE_WARN_RATIO = 10.0
MSPROBE_WARN_ZERO_IN = 0.1
# Our own divergence tolerance on the scale-aware error below. Runs on two devices differ by
# ~1e-3 per operator and a few 1e-3 after accumulation; a defect shows as several per cent.
DIVERGE = 0.02
# Inputs within this are "the same" when deciding whether an operator introduced an error.
INPUT_MATCH = 0.01
# msprobe's ignore list: no meaningful data in these outputs.
IGNORED_APIS = {"empty", "empty_like", "numpy", "to", "__setitem__", "empty_with_format",
                "new_empty_strided", "new_empty", "empty_strided"}

Mode = str  # "statistics" | "md5" | "exact"


@dataclass(slots=True)
class TensorDiff:
    """How one tensor (or scalar) of the run departs from the other run's."""

    slot: str
    err: float                 # scale-aware relative error (0 = equal)
    norm_rel: float            # |dNorm| / |Norm| as msprobe computes NormRelativeErr
    reasons: tuple[str, ...]   # hard mismatches


@dataclass(slots=True)
class ApiDiff:
    """The comparison of one paired API call."""

    inputs: list[TensorDiff] = field(default_factory=list)
    outputs: list[TensorDiff] = field(default_factory=list)
    label: str = "pass"
    diverged: bool = False
    reason: str | None = None

    @property
    def in_err(self) -> float:
        return max((d.err for d in self.inputs), default=0.0)

    @property
    def out_err(self) -> float:
        return max((d.err for d in self.outputs), default=0.0)

    def input_reasons(self) -> set[str]:
        return {r for d in self.inputs for r in d.reasons}


def _rel(a: float, b: float, scale: float) -> float:
    if a == b:
        return 0.0
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return 0.0
    try:
        d = abs(a - b)
    except TypeError:
        return math.inf
    if math.isnan(d) or math.isinf(d):
        return math.inf
    if scale <= 0 or not math.isfinite(scale):
        return math.inf if d > 0 else 0.0
    return d / scale


def _number(v) -> float | None:
    if type(v) is float or v is None:
        return v
    if isinstance(v, (str, bool)):
        return None
    try:
        return float(v)
    except (TypeError, ValueError, OverflowError):   # not a number: missing (entries warn)
        return None


def tensor_diff(a: TensorInfo, b: TensorInfo, mode: Mode) -> TensorDiff:
    """Compare one leaf of the run (a) with the other run's (b)."""
    reasons: list[str] = []
    if a.kind != b.kind:
        if "none" in (a.kind, b.kind):
            return TensorDiff(a.slot, 0.0, 0.0, ())
        return TensorDiff(a.slot, math.inf, math.inf, ("shape",))
    if a.kind == "none":
        return TensorDiff(a.slot, 0.0, 0.0, ())
    if a.kind == "scalar":
        if a.value != b.value:
            return TensorDiff(a.slot, math.inf, math.inf, ("scalar_arg",))
        return TensorDiff(a.slot, 0.0, 0.0, ())
    if (a.max == b.max and a.min == b.min and a.mean == b.mean and a.norm == b.norm
            and a.md5 == b.md5 and a.dtype == b.dtype and a.shape == b.shape and a.bad is None
            and a.requires_grad == b.requires_grad):
        return TensorDiff(a.slot, 0.0, 0.0, ())   # bit-equal: the common case between reruns
    if a.dtype != b.dtype:
        reasons.append("dtype")
    if a.shape != b.shape:
        reasons.append("shape")
    if a.requires_grad is not None and b.requires_grad is not None and a.requires_grad != b.requires_grad:
        reasons.append("requires_grad")
    if mode == "md5" and a.md5 is not None and b.md5 is not None:
        if a.md5 != b.md5:
            reasons.append("md5")
            return TensorDiff(a.slot, 1.0, 1.0, tuple(reasons))
        return TensorDiff(a.slot, 0.0, 0.0, tuple(reasons))
    if not reasons and a.bad is None and b.bad is None and a.md5 is None:
        fast = _finite_stats_error(a, b)
        if fast is not None:
            return TensorDiff(a.slot, fast[0], fast[1], ())
    bad_a, bad_b = a.abnormal(), b.abnormal()
    if bad_a and not bad_b:
        reasons.append("nonfinite")
    amx, amn, ame, ano = _number(a.max), _number(a.min), _number(a.mean), _number(a.norm)
    bmx, bmn, bme, bno = _number(b.max), _number(b.min), _number(b.mean), _number(b.norm)
    finite_b = [abs(x) for x in (bmx, bmn) if x is not None and math.isfinite(x)]
    scale = max(finite_b, default=0.0)
    norm_rel = 0.0
    errs: list[float] = []
    if ano is not None and bno is not None:
        norm_rel = _rel(ano, bno, abs(bno))
        errs.append(norm_rel)
    for x, y in ((amx, bmx), (amn, bmn)):
        if x is not None and y is not None:
            errs.append(_rel(x, y, scale))
    if ame is not None and bme is not None:
        # a mean is compared with the tensor's RMS, not itself: means near 0 explode otherwise
        rms = (bno / math.sqrt(max(b.numel, 1))) if bno is not None and math.isfinite(bno) else scale
        errs.append(_rel(ame, bme, rms if rms and rms > 0 else scale))
    if a.md5 is not None and b.md5 is not None and a.md5 != b.md5 and mode == "exact":
        errs.append(max(errs, default=0.0) or 1e-12)
    err = max(errs, default=0.0)
    if mode == "exact" and err == 0.0 and a.md5 is not None and b.md5 is not None and a.md5 != b.md5:
        err = 1e-12
    return TensorDiff(a.slot, err, norm_rel, tuple(reasons))


_FLOAT = float
_INF = math.inf


def _finite_stats_error(a: TensorInfo, b: TensorInfo) -> tuple[float, float] | None:
    """The same error as the general path, for the common case of eight finite floats."""
    amx, amn, ame, ano = a.max, a.min, a.mean, a.norm
    bmx, bmn, bme, bno = b.max, b.min, b.mean, b.norm
    if not (type(amx) is _FLOAT and type(amn) is _FLOAT and type(ame) is _FLOAT and type(ano) is _FLOAT
            and type(bmx) is _FLOAT and type(bmn) is _FLOAT and type(bme) is _FLOAT and type(bno) is _FLOAT):
        return None
    if not (-_INF < bmn and bmx < _INF and -_INF < amn and amx < _INF and bno < _INF and ano < _INF):
        return None
    scale = bmx if bmx > -bmn else -bmn
    if bno == 0.0 or scale <= 0.0:
        return None
    norm_rel = abs(ano - bno) / abs(bno)
    err = norm_rel
    e = abs(amx - bmx) / scale
    if e > err:
        err = e
    e = abs(amn - bmn) / scale
    if e > err:
        err = e
    numel = b.numel
    rms = bno / math.sqrt(numel if numel > 0 else 1)
    e = abs(ame - bme) / (rms if rms > 0 else scale)
    if e > err:
        err = e
    return err, norm_rel


def _pair_leaves(xs: list[TensorInfo], ys: list[TensorInfo]) -> list[tuple[TensorInfo, TensorInfo]]:
    by_slot = {y.slot: y for y in ys}
    return [(x, by_slot[x.slot]) for x in xs if x.slot in by_slot]


def compare_api(a: Entry, b: Entry, mode: Mode) -> ApiDiff:
    """Compare one paired API call; sets msprobe-like label, our divergence flag and reason."""
    diff = ApiDiff()
    for x, y in _pair_leaves(a.inputs + a.params, b.inputs + b.params):
        diff.inputs.append(tensor_diff(x, y, mode))
    for x, y in _pair_leaves(a.outputs, b.outputs):
        diff.outputs.append(tensor_diff(x, y, mode))
    if len(a.outputs) != len(b.outputs) or len(a.inputs) != len(b.inputs):
        diff.outputs.append(TensorDiff("output", math.inf, math.inf, ("shape",)))
    api_short = a.name.base.rsplit(".", 1)[-1]
    if api_short in IGNORED_APIS:
        return diff
    out_reasons = [r for d in diff.outputs for r in d.reasons]
    in_reasons = [r for d in diff.inputs for r in d.reasons]
    if mode == "exact":
        diff.diverged = diff.out_err > 0 or bool(out_reasons)
        diff.label = "error" if diff.diverged else "pass"
        diff.reason = (out_reasons or ["output_error"])[0] if diff.diverged else None
        return diff
    hard = [r for r in out_reasons + in_reasons if r in ("dtype", "shape", "scalar_arg", "requires_grad", "md5")]
    nonfinite = "nonfinite" in out_reasons
    in_norm = max((d.norm_rel for d in diff.inputs), default=0.0)
    out_norm = max((d.norm_rel for d in diff.outputs), default=0.0)
    if hard or nonfinite or (in_norm < MSPROBE_IN_MAX and out_norm > MSPROBE_OUT_ERROR):
        diff.label = "error"
    elif (in_norm > 0 and out_norm / in_norm > MSPROBE_WARN_RATIO and out_norm > 1e-3) or \
            (in_norm == 0 and out_norm > MSPROBE_WARN_ZERO_IN):
        diff.label = "warning"
    if mode == "md5":
        diff.diverged = bool(out_reasons) or diff.label == "error"
    else:
        diff.diverged = diff.out_err > DIVERGE or nonfinite or bool(
            [r for r in out_reasons if r in ("dtype", "shape")])
    if nonfinite:
        diff.reason = "nonfinite"
    elif hard:
        diff.reason = hard[0]
    elif diff.diverged:
        diff.reason = "output_error"
    return diff


def _leaf_errors(x: TensorInfo, y: TensorInfo) -> tuple[float, float] | None:
    """(err, norm_rel) of `tensor_diff(x, y, mode)` for modes statistics and exact when it has no
    reasons and takes one of its simple paths; None otherwise."""
    kx = x.kind
    if kx != y.kind:
        if kx == "none" or y.kind == "none":
            return 0.0, 0.0
        return None
    if kx == "none":
        return 0.0, 0.0
    if kx == "scalar":
        return (0.0, 0.0) if x.value == y.value else None
    if (x.max == y.max and x.min == y.min and x.mean == y.mean and x.norm == y.norm
            and x.md5 == y.md5 and x.dtype == y.dtype and x.shape == y.shape and x.bad is None
            and x.requires_grad == y.requires_grad):
        return 0.0, 0.0
    if x.dtype != y.dtype or x.shape != y.shape:
        return None
    if x.requires_grad is not None and y.requires_grad is not None and x.requires_grad != y.requires_grad:
        return None
    if x.bad is None and y.bad is None and x.md5 is None:
        return _finite_stats_error(x, y)
    return None


def compare_summary(a: Entry, b: Entry, mode: Mode) -> tuple[str, bool, float, float] | None:
    """(label, diverged, out_err, in_err) exactly as `compare_api(a, b, mode)` gives them, for the
    common case (modes statistics and exact; every paired leaf equal, a tensor of finite
    statistics without checksum, dtype, shape or requires_grad difference, an equal scalar or a
    None), without building the per-tensor diffs; None when compare_api is needed (then no
    input carries a hard reason either)."""
    if mode != "statistics" and mode != "exact":
        return None
    if len(a.outputs) != len(b.outputs) or len(a.inputs) != len(b.inputs):
        return None
    # running maxima exactly like max() over the diffs in order (the first one starts it: a NaN
    # error, from an overflowing statistic, then stays, as in compare_api)
    in_err = in_norm = out_err = out_norm = None
    ys = b.inputs + b.params if b.params else b.inputs
    by_slot = {y.slot: y for y in ys}
    for xs in (a.inputs, a.params):
        for x in xs:
            y = by_slot.get(x.slot)
            if y is None:
                continue
            r = _leaf_errors(x, y)
            if r is None:
                return None
            if in_err is None:
                in_err, in_norm = r
                continue
            if r[0] > in_err:
                in_err = r[0]
            if r[1] > in_norm:
                in_norm = r[1]
    by_slot = {y.slot: y for y in b.outputs}
    for x in a.outputs:
        y = by_slot.get(x.slot)
        if y is None:
            continue
        r = _leaf_errors(x, y)
        if r is None:
            return None
        if out_err is None:
            out_err, out_norm = r
            continue
        if r[0] > out_err:
            out_err = r[0]
        if r[1] > out_norm:
            out_norm = r[1]
    if in_err is None:
        in_err = in_norm = 0.0
    if out_err is None:
        out_err = out_norm = 0.0
    if a.name.base.rsplit(".", 1)[-1] in IGNORED_APIS:
        return "pass", False, out_err, in_err
    if mode == "exact":
        diverged = out_err > 0
        return ("error" if diverged else "pass"), diverged, out_err, in_err
    if in_norm < MSPROBE_IN_MAX and out_norm > MSPROBE_OUT_ERROR:
        label = "error"
    elif (in_norm > 0 and out_norm / in_norm > MSPROBE_WARN_RATIO and out_norm > 1e-3) or \
            (in_norm == 0 and out_norm > MSPROBE_WARN_ZERO_IN):
        label = "warning"
    else:
        label = "pass"
    return label, out_err > DIVERGE, out_err, in_err
