"""Classifying what a comparison pass found: how the first diverging API got its difference
(introduced, propagated, wiring, weights, data input), where the first Inf/NaN comes from, and
whether a run/rerun difference is a nondeterministic operator. Pure functions over PassResult."""
from __future__ import annotations

import math
from dataclasses import dataclass

from precdx.collectors.msprobe.comparison import Candidate, PassResult, SideScan, tensor_key
from precdx.collectors.msprobe.entries import Entry, TensorInfo
from precdx.collectors.msprobe.naming import EntryName, api_family, param_family
from precdx.collectors.msprobe.verdicts import DIVERGE, INPUT_MATCH, _finite_stats_error

_MODULE_FAMILIES = {"embedding": "embedding", "norm": "norm", "attention": "attention"}


def entry_family(name: EntryName) -> str:
    """Operator family of an entry: the API's, or for a module (L0 dumps, the training monitor) the
    family its path names (embedding, norm, attention), else 'module'."""
    if name.is_module:
        path = name.module_path or ""
        return _MODULE_FAMILIES.get(param_family(path), "module") if path else "module"
    return api_family(name.base)


# Which input kinds explain a divergence best when several inputs differ.
_KIND_PRIORITY = ("data_input", "weights", "wiring", "propagated")


@dataclass
class Located:
    """One located API with what the facts need (plain data: crosses process boundaries)."""

    api: str
    api_name: str
    family: str
    direction: str
    order: int
    kind: str
    reason: str | None = None
    dtype: str | None = None
    dtype_against: str | None = None
    input_rel_err: float | None = None
    output_rel_err: float | None = None
    label: str | None = None
    matched_by: str = "name"
    value: str | None = None           # first_nan: nan | inf | mixed
    comm_input_abnormal: bool | None = None
    module: str | None = None
    code_line: str | None = None
    after_loss: bool | None = None     # first_divergence: the loss was already computed (see classify)


def _first_tensor(ts: list[TensorInfo]) -> TensorInfo | None:
    return next((t for t in ts if t.kind == "tensor"), None)


def _by_slot(e: Entry) -> dict[str, TensorInfo]:
    return {t.slot: t for t in e.inputs + e.params}


def _input_origin(t: TensorInfo, e: Entry, run: SideScan, res: PassResult) -> str:
    """Why one differing input of the first diverging API differs."""
    if t.slot.startswith("parameters."):
        return "weights"
    key = tensor_key(t)
    producer = run.producers.get(key) if key is not None else None
    if producer is not None and producer < e.order:
        # produced by an earlier call: that call matched (else it would be first), so either its
        # small error grew (propagated) or a different tensor is fed in here (wiring)
        return "propagated" if res.weak_outputs.get(producer, 0.0) > INPUT_MATCH else "wiring"
    if t.is_integer or (t.dtype or "").endswith("bool"):
        return "data_input"
    if key is not None and key in run.param_keys:
        return "weights"
    if e.name.is_module:
        # a module-level view (L0 dump, training monitor): what reaches a module without coming
        # from an earlier module was computed by its parent's own code between two modules (the
        # model's input excepted: it reaches the first module)
        return "data_input" if e.order == run.first_order else "introduced"
    if t.requires_grad:
        # a leaf that needs a gradient and that no dumped call produced is a parameter
        return "weights"
    return "data_input"


def classify_divergence(c: Candidate, res: PassResult) -> Located:
    """Kind and numbers of the first diverging API."""
    a, d = c.a, c.diff
    threshold = 0.0 if res.mode in ("exact", "md5") else INPUT_MATCH
    slots = _by_slot(a)
    differing = [td for td in d.inputs
                 if td.err > threshold or set(td.reasons) & {"dtype", "shape", "md5", "nonfinite"}]
    scalar_changed = any("scalar_arg" in td.reasons for td in d.inputs)
    kinds = []
    for td in differing:
        t = slots.get(td.slot)
        if t is None or t.kind != "tensor":
            continue
        if "dtype" in td.reasons and td.err <= DIVERGE:
            continue  # same values in another precision: the call itself computes differently
        kinds.append(_input_origin(t, a, res.run, res))
    kinds = [k for k in kinds if k != "introduced"]
    if not kinds or scalar_changed:
        kind = "introduced"
    else:
        kind = next(k for k in _KIND_PRIORITY if k in kinds)
    out_t = _first_tensor(a.outputs) or _first_tensor(a.inputs)
    out_b = _first_tensor(c.b.outputs) or _first_tensor(c.b.inputs)
    reason = d.reason
    if reason is None:
        in_reasons = sorted(d.input_reasons() - {"requires_grad"})
        reason = in_reasons[0] if in_reasons else "input_error"
    if scalar_changed:
        reason = "scalar_arg"
    label = d.label if d.label != "pass" else "warning"
    run = res.run
    if a.name.direction == "forward":
        # the loss reduction (sum, mean, division, scaling) after the loss function, not a layer
        # of a later micro-batch
        after_loss = run.first_loss_order is not None and run.first_loss_order < a.order and \
            api_family(a.name.base) in ("elementwise", "loss", "other")
    else:
        # every forward entry matched and the very first backward entry gets a gradient no dumped
        # call produced: the gradient of the loss itself (its definition or scaling) differs (a
        # module's weight gradients come just before its backward entry: the first module's count)
        first = run.first_backward_order
        if a.name.direction == "parameters_grad":
            after_loss = first is None or a.order < first
        else:
            after_loss = kind in ("introduced", "data_input") and a.order == first and bool(d.inputs) \
                and d.in_err > INPUT_MATCH
    return Located(
        api=a.name.full, api_name=a.name.base, family=entry_family(a.name),
        direction=a.name.direction if a.name.direction in ("forward", "backward", "parameters_grad") else "forward",
        order=a.order, kind=kind, reason=reason,
        dtype=out_t.dtype if out_t else None, dtype_against=out_b.dtype if out_b else None,
        input_rel_err=_finite_or_inf(d.in_err), output_rel_err=_finite_or_inf(d.out_err),
        label=label, matched_by=c.matched_by, after_loss=after_loss)


def classify_nondeterminism(c: Candidate) -> Located:
    """First difference between a run and its rerun: the operator itself, or already an input."""
    a, d = c.a, c.diff
    input_same = d.in_err == 0.0 and not (d.input_reasons() - {"requires_grad"})
    bad_a = any(t.abnormal() for t in a.outputs if t.kind == "tensor")
    bad_b = any(t.abnormal() for t in c.b.outputs if t.kind == "tensor")
    if not input_same:
        kind = "input_differs"
    elif bad_a != bad_b:
        kind = "nonfinite_differs"   # a NaN in one run only is no rounding-order effect
    else:
        kind = "nondeterministic_op"
    return Located(
        api=a.name.full, api_name=a.name.base, family=entry_family(a.name),
        direction=a.name.direction if a.name.direction in ("forward", "backward", "parameters_grad") else "forward",
        order=a.order, kind=kind,
        output_rel_err=_stats_error(a.outputs, c.b.outputs), input_rel_err=_finite_or_inf(d.in_err),
        matched_by=c.matched_by)


def _stats_error(xs: list[TensorInfo], ys: list[TensorInfo]) -> float | None:
    """How far the outputs' statistics are apart (md5 dumps carry them beside the checksum);
    None when no pair of finite statistics is there (xor checksums only)."""
    errs = []
    for x, y in zip(xs, ys):
        if x.kind == "tensor" and y.kind == "tensor":
            e = _finite_stats_error(x, y)
            if e is not None:
                errs.append(e[0])
    return max(errs) if errs else None


def _finite_or_inf(x: float) -> float:
    return x if not math.isnan(x) else math.inf


def _value_of(ts: list[TensorInfo]) -> str | None:
    kinds = {t.abnormal() for t in ts if t.kind == "tensor"} - {None}
    if not kinds:
        return None
    return kinds.pop() if len(kinds) == 1 else "mixed"


def locate_first_nan(scan: SideScan) -> Located | None:
    """Where the first Inf/NaN of one dump comes from (per msprobe's first-overflow procedure:
    finite inputs and non-finite output = that operator; non-finite parameter = the previous
    step's backward/update; non-finite input with no producer in the dump = an uncaptured op)."""
    e = scan.nan_entry
    if e is None:
        return None
    family = entry_family(e.name)
    bad_in = [t for t in e.inputs + e.params if t.kind == "tensor" and t.abnormal()]
    bad_out = [t for t in e.outputs if t.kind == "tensor" and t.abnormal()]
    if not bad_in:
        kind = "communication" if family == "communication" else "operator_output"
    elif any(_is_parameter(t, e, scan) for t in bad_in):
        kind = "weight"
    elif e.name.is_module and e.order != scan.first_order:
        # a module-level view (L0 dump, training monitor): what reaches a module non-finite while
        # every module before it was finite was made by its parent's own code between two
        # modules -- an operator, as far as this view can tell (only an API-level dump can say
        # whether the dump captured it)
        kind = "operator_output"
    else:
        kind = "input"
    return Located(
        api=e.name.full, api_name=e.name.base, family=family,
        direction=e.name.direction if e.name.direction in ("forward", "backward", "parameters_grad") else "forward",
        order=e.order, kind=kind, value=_value_of(bad_out or bad_in),
        comm_input_abnormal=bool(bad_in) if family == "communication" else None)


_WEIGHTED_FAMILIES = ("matmul", "norm", "embedding", "attention", "fused_attention")


def _is_parameter(t: TensorInfo, e: Entry, scan: SideScan) -> bool:
    if t.slot.startswith("parameters."):
        return True
    if scan.abnormal_param_shapes:
        return t.shape in scan.abnormal_param_shapes
    if scan.modules:
        return False  # modules were dumped and none holds a non-finite parameter
    # L1 dumps carry no module parameters: a gradient-carrying tensor in a weight position
    # (weights, embedding tables and norm scales are 1-D or 2-D; activations have batch dimensions)
    return bool(t.requires_grad) and t.slot != "input.0" and api_family(e.name.base) in _WEIGHTED_FAMILIES \
        and t.shape is not None and len(t.shape) <= 2
