"""One dump.json entry as compact records: its input, parameter and output tensors (or scalar
arguments) with their statistics / checksum, flattened in msprobe's slot order."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from engine.collectors.msprobe.jsonstream import denan
from engine.collectors.msprobe.naming import EntryName, parse_entry_name

_STATS = ("Max", "Min", "Mean", "Norm")


@dataclass(slots=True)
class TensorInfo:
    """One leaf of an entry: a tensor's statistics, a scalar argument, or an explicit None."""

    slot: str                      # input.0, input.dim, parameters.weight, output.0 ...
    kind: str                      # tensor | scalar | none
    dtype: str | None = None
    shape: tuple | None = None
    max: Any = None
    min: Any = None
    mean: Any = None
    norm: Any = None
    md5: str | None = None
    requires_grad: bool | None = None
    value: str | None = None       # scalar arguments, as text
    bad: str | None = None         # cached abnormal(): "nan" | "inf" | None

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape or ():
            n *= d if isinstance(d, int) else 1
        return n

    @property
    def is_float(self) -> bool:
        d = (self.dtype or "").lower()
        return any(t in d for t in ("float", "half", "bf16", "double", "complex"))

    @property
    def is_integer(self) -> bool:
        d = (self.dtype or "").lower()
        return ("int" in d or "long" in d) and not self.is_float

    def abnormal(self) -> str | None:
        """'nan' / 'inf' when the statistics show values that are not finite numbers (cached)."""
        return self.bad

    def _classify(self) -> str | None:
        """A -inf minimum with a finite maximum is the legal fill of an attention mask
        (masked_fill / where with -inf), so it is not counted; Mean/Norm overflowing while
        Max/Min are finite is a statistics overflow, not a bad tensor."""
        mx, mn, me, no = self.max, self.min, self.mean, self.norm
        if (type(mx) is float and type(mn) is float and -math.inf < mn <= mx < math.inf
                and (me is None or me == me) and (no is None or no == no)):
            return None   # the common case: finite extremes, no NaN anywhere
        if self.kind != "tensor":
            return None
        vals = (self.max, self.min, self.mean, self.norm)
        if any(type(v) is float and v != v for v in vals):
            return "nan"
        mx, mn = self.max, self.min
        if type(mx) is float and math.isinf(mx):
            return "inf"
        if type(mn) is float and mn == math.inf:
            return "inf"
        return None


@dataclass(slots=True)
class Entry:
    """One dump entry (API call or module call) in execution order."""

    name: EntryName
    order: int
    inputs: list[TensorInfo] = field(default_factory=list)
    params: list[TensorInfo] = field(default_factory=list)
    outputs: list[TensorInfo] = field(default_factory=list)

    def tensors(self) -> list[TensorInfo]:
        return [t for t in (*self.inputs, *self.params, *self.outputs) if t.kind == "tensor"]


def _num(v: Any) -> Any:
    # sentinels are tiny sub-normals: one comparison keeps the common case cheap
    if type(v) is float and -1e-300 < v < 1e-300:
        return denan(v)
    return v


def _leaf(slot: str, v: Any) -> TensorInfo:
    if v is None:
        return TensorInfo(slot, "none")
    if not isinstance(v, dict):
        return TensorInfo(slot, "scalar", value=str(_num(v)))
    if "dtype" in v or "shape" in v or "md5" in v or "Max" in v:
        shape = v.get("shape")
        dtype = v.get("dtype")
        t = TensorInfo(
            slot, "tensor", dtype if dtype is None or type(dtype) is str else str(dtype),
            tuple(shape) if type(shape) is list else None,
            _num(v.get("Max")), _num(v.get("Min")), _num(v.get("Mean")),
            _num(v.get("Norm")), v.get("md5"), v.get("requires_grad"))
        t.bad = t._classify()
        return t
    if "value" in v:
        return TensorInfo(slot, "scalar", dtype=str(v.get("type")), value=repr(_num(v.get("value"))))
    return TensorInfo(slot, "scalar", dtype=str(v.get("type")), value=None)


def _flatten(slot: str, v: Any, out: list[TensorInfo]) -> None:
    if isinstance(v, list):
        for i, item in enumerate(v):
            _flatten(f"{slot}.{i}", item, out)
    elif isinstance(v, dict) and "type" not in v and "dtype" not in v and v:
        # a dict that is not a leaf: kwargs or a parameters map
        for k, item in v.items():
            _flatten(f"{slot}.{k}", item, out)
    else:
        out.append(_leaf(slot, v))


def build_entry(name: str, body: Any, order: int) -> Entry:
    """Turn one `data` item of dump.json into an Entry (tolerates missing parts)."""
    entry = Entry(parse_entry_name(name), order)
    if not isinstance(body, dict):
        return entry
    if entry.name.direction == "parameters_grad":
        for pname, v in body.items():
            _flatten(f"output.{pname}", v, entry.outputs)
        return entry
    for key in ("input_args", "input"):
        if key in body:
            _flatten("input", body[key], entry.inputs)
    kwargs = body.get("input_kwargs")
    if isinstance(kwargs, dict):
        for k, v in kwargs.items():
            _flatten(f"input.{k}", v, entry.inputs)
    # pre-1.0 API-info files use args/kwargs
    if "args" in body and not entry.inputs:
        _flatten("input", body["args"], entry.inputs)
    params = body.get("parameters")
    if isinstance(params, dict):
        for k, v in params.items():
            _flatten(f"parameters.{k}", v, entry.params)
    if "output" in body:
        _flatten("output", body["output"], entry.outputs)
    return entry
