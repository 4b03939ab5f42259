"""One dump.json entry as compact records: its input, parameter and output tensors (or scalar
arguments) with their statistics / checksum, flattened in msprobe's slot order."""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from precdx.collectors.msprobe.jsonstream import denan
from precdx.collectors.msprobe.naming import EntryName, parse_entry_name

_STATS = ("Max", "Min", "Mean", "Norm")
# Arguments nest a few levels (tuples of lists of tensors); deeper parts of an entry are left out.
MAX_DEPTH = 64
_NUMEL_CAP = 1 << 63
_INF = math.inf


class EntryIssues:
    """Odd content met while building one file's entries, counted per kind with the first entry
    that had it, and reported once per file (see `messages`)."""

    def __init__(self) -> None:
        self.counts: Counter = Counter()
        self.first: dict[str, str] = {}

    def add(self, kind: str, where: str) -> None:
        self.counts[kind] += 1
        self.first.setdefault(kind, where)

    def messages(self) -> list[str]:
        out = []
        for kind, n in self.counts.items():
            where = self.first[kind]
            if kind == "stat":
                out.append(f"dump.json has {n} statistic(s) that are not numbers (first: {where}); "
                           "they count as missing")
            elif kind == "body":
                out.append(f"dump.json has {n} entry body(ies) that are not JSON objects (first: {where}); "
                           "those entries carry no tensors")
            elif kind == "bigint":
                out.append("dump.json has integers beyond 64 bits (integer overflow in the fast JSON "
                           "reader): read with the slower pure-Python reader")
            elif kind == "deep":
                out.append(f"dump.json has {n} argument(s) nested more than {MAX_DEPTH} levels deep "
                           f"(first: {where}); the deeper parts were left out")
        return out


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
            n *= d if type(d) is int else 1
        return n if -_NUMEL_CAP < n < _NUMEL_CAP else _NUMEL_CAP

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


_BAD = object()


def _stat_value(v: Any, bool_tensor: bool = False) -> Any:
    """A statistic as a number (None when absent); _BAD when it is not a number (a list, text
    that is no number, an integer beyond float range, a boolean of a non-bool tensor). msprobe
    writes the Max/Min of a bool tensor (an attention mask) as true/false: read as 1/0."""
    t = type(v)
    if t is float:
        return _num(v)
    if v is None:
        return None
    if t is bool:
        return int(v) if bool_tensor else _BAD
    if t is int:
        try:
            float(v)
        except OverflowError:
            return _BAD
        return v
    if t is str:
        try:
            return float(v)   # 'inf', 'nan', '1.5'
        except ValueError:
            return _BAD
    return _BAD


def _shape(shape: Any) -> tuple | None:
    if type(shape) is not list:
        return None
    # dimensions are ints; anything else is kept as text so shapes stay hashable and comparable
    return tuple(d if type(d) is int else repr(d) for d in shape)


def _leaf(slot: str, v: Any, issues: EntryIssues | None = None, where: str = "") -> TensorInfo:
    if v is None:
        return TensorInfo(slot, "none")
    if not isinstance(v, dict):
        return TensorInfo(slot, "scalar", value=str(_num(v)))
    if "dtype" in v or "shape" in v or "md5" in v or "Max" in v:
        get = v.get
        dtype = get("dtype")
        mx, mn, me, no = get("Max"), get("Min"), get("Mean"), get("Norm")
        if type(mx) is float and type(mn) is float and type(me) is float and type(no) is float:
            # the common case; sentinels are tiny sub-normals (see _num)
            if -1e-300 < mx < 1e-300:
                mx = denan(mx)
            if -1e-300 < mn < 1e-300:
                mn = denan(mn)
            if -1e-300 < me < 1e-300:
                me = denan(me)
            if -1e-300 < no < 1e-300:
                no = denan(no)
        else:
            is_bool = type(dtype) is str and dtype.endswith("bool")
            stats = [_stat_value(x, is_bool) for x in (mx, mn, me, no)]
            for i, x in enumerate(stats):
                if x is _BAD:
                    stats[i] = None
                    if issues is not None:
                        issues.add("stat", f"{_STATS[i]} of {where} {slot}")
            mx, mn, me, no = stats
        shape = get("shape")
        if type(shape) is list:
            shape = tuple(shape)
            for d in shape:
                if type(d) is not int:
                    shape = _shape(list(shape))
                    break
        else:
            shape = None
        t = TensorInfo(slot, "tensor", dtype if dtype is None or type(dtype) is str else str(dtype), shape,
                       mx, mn, me, no, get("md5"), get("requires_grad"))
        # _classify, its first (common) case inlined
        if not (type(mx) is float and type(mn) is float and -_INF < mn <= mx < _INF
                and (me is None or me == me) and (no is None or no == no)):
            t.bad = t._classify()
        return t
    if "value" in v:
        return TensorInfo(slot, "scalar", dtype=str(v.get("type")), value=repr(_num(v.get("value"))))
    return TensorInfo(slot, "scalar", dtype=str(v.get("type")), value=None)


def _flatten(slot: str, v: Any, out: list[TensorInfo], issues: EntryIssues | None = None,
             where: str = "", depth: int = 0) -> None:
    if isinstance(v, list):
        if depth >= MAX_DEPTH:
            if issues is not None:
                issues.add("deep", f"{where} {slot}")
            return
        for i, item in enumerate(v):
            # a leaf item directly (what the recursive call would do, one call fewer)
            if isinstance(item, list) or (isinstance(item, dict) and "type" not in item and "dtype" not in item
                                          and item):
                _flatten(f"{slot}.{i}", item, out, issues, where, depth + 1)
            else:
                out.append(_leaf(f"{slot}.{i}", item, issues, where))
    elif isinstance(v, dict) and "type" not in v and "dtype" not in v and v:
        # a dict that is not a leaf: kwargs or a parameters map
        if depth >= MAX_DEPTH:
            if issues is not None:
                issues.add("deep", f"{where} {slot}")
            return
        for k, item in v.items():
            _flatten(f"{slot}.{k}", item, out, issues, where, depth + 1)
    else:
        out.append(_leaf(slot, v, issues, where))


def build_entry(name: str, body: Any, order: int, issues: EntryIssues | None = None) -> Entry:
    """Turn one `data` item of dump.json into an Entry (tolerates missing parts; what is odd is
    counted in `issues`)."""
    entry = Entry(parse_entry_name(name), order)
    if not isinstance(body, dict):
        if issues is not None:
            issues.add("body", name)
        return entry
    if entry.name.direction == "parameters_grad":
        for pname, v in body.items():
            _flatten(f"output.{pname}", v, entry.outputs, issues, name)
        return entry
    for key in ("input_args", "input"):
        if key in body:
            _flatten("input", body[key], entry.inputs, issues, name)
    kwargs = body.get("input_kwargs")
    if isinstance(kwargs, dict):
        for k, v in kwargs.items():
            _flatten(f"input.{k}", v, entry.inputs, issues, name, 1)
    # pre-1.0 API-info files use args/kwargs
    if "args" in body and not entry.inputs:
        _flatten("input", body["args"], entry.inputs, issues, name)
    params = body.get("parameters")
    if isinstance(params, dict):
        for k, v in params.items():
            _flatten(f"parameters.{k}", v, entry.params, issues, name, 1)
    if "output" in body:
        _flatten("output", body["output"], entry.outputs, issues, name)
    return entry
