"""The msprobe entry path as it was before the performance work (issue 17), verbatim: leaf
building, entry-name parsing, SideScan.observe and _Pass.process. `reference_pipeline()` puts
them in place of the fast ones, so a test compares the whole comparison old against new."""
from __future__ import annotations

import contextlib
import math
from typing import Any

from precdx.collectors.msprobe import comparison, dumpdir, entries, naming
from precdx.collectors.msprobe.naming import api_family
from precdx.collectors.msprobe.comparison import _INIT_OPS, Candidate, tensor_key
from precdx.collectors.msprobe.entries import (
    _BAD, _STATS, Entry, EntryIssues, TensorInfo, _num, _shape, _stat_value)
from precdx.collectors.msprobe.naming import _API, _DEBUG, _MODULE, EntryName
from precdx.collectors.msprobe.verdicts import DIVERGE, compare_api


def parse_entry_name(name: str) -> EntryName:
    m = _MODULE.match(name)
    if m:
        return EntryName(name, m["base"], int(m["index"]), m["dir"], True)
    m = _API.match(name)
    if m:
        return EntryName(name, m["base"], int(m["index"]), m["dir"], m["base"].startswith(("Module.", "Cell.")))
    m = _DEBUG.match(name)
    if m:
        return EntryName(name, m["base"], int(m["index"]), "debug", False)
    return EntryName(name, name, 0, "unknown", name.startswith(("Module.", "Cell.")))


def _leaf(slot: str, v: Any, issues: EntryIssues | None = None, where: str = "") -> TensorInfo:
    if v is None:
        return TensorInfo(slot, "none")
    if not isinstance(v, dict):
        return TensorInfo(slot, "scalar", value=str(_num(v)))
    if "dtype" in v or "shape" in v or "md5" in v or "Max" in v:
        dtype = v.get("dtype")
        mx, mn, me, no = v.get("Max"), v.get("Min"), v.get("Mean"), v.get("Norm")
        if type(mx) is float and type(mn) is float and type(me) is float and type(no) is float:
            mx, mn, me, no = _num(mx), _num(mn), _num(me), _num(no)   # the common case
        else:
            is_bool = type(dtype) is str and dtype.endswith("bool")
            stats = [_stat_value(x, is_bool) for x in (mx, mn, me, no)]
            for i, x in enumerate(stats):
                if x is _BAD:
                    stats[i] = None
                    if issues is not None:
                        issues.add("stat", f"{_STATS[i]} of {where} {slot}")
            mx, mn, me, no = stats
        t = TensorInfo(
            slot, "tensor", dtype if dtype is None or type(dtype) is str else str(dtype),
            _shape(v.get("shape")), mx, mn, me, no, v.get("md5"), v.get("requires_grad"))
        t.bad = t._classify()
        return t
    if "value" in v:
        return TensorInfo(slot, "scalar", dtype=str(v.get("type")), value=repr(_num(v.get("value"))))
    return TensorInfo(slot, "scalar", dtype=str(v.get("type")), value=None)


def _flatten(slot: str, v: Any, out: list[TensorInfo], issues: EntryIssues | None = None,
             where: str = "", depth: int = 0) -> None:
    if isinstance(v, list):
        if depth >= entries.MAX_DEPTH:
            if issues is not None:
                issues.add("deep", f"{where} {slot}")
            return
        for i, item in enumerate(v):
            _flatten(f"{slot}.{i}", item, out, issues, where, depth + 1)
    elif isinstance(v, dict) and "type" not in v and "dtype" not in v and v:
        if depth >= entries.MAX_DEPTH:
            if issues is not None:
                issues.add("deep", f"{where} {slot}")
            return
        for k, item in v.items():
            _flatten(f"{slot}.{k}", item, out, issues, where, depth + 1)
    else:
        out.append(_leaf(slot, v, issues, where))


def build_entry(name: str, body: Any, order: int, issues: EntryIssues | None = None) -> Entry:
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
    if "args" in body and not entry.inputs:
        _flatten("input", body["args"], entry.inputs, issues, name)
    params = body.get("parameters")
    if isinstance(params, dict):
        for k, v in params.items():
            _flatten(f"parameters.{k}", v, entry.params, issues, name, 1)
    if "output" in body:
        _flatten("output", body["output"], entry.outputs, issues, name)
    return entry


def observe(self, e: Entry) -> None:
    self.entries += 1
    if e.name.is_module:
        self.modules += 1
    else:
        self.apis += 1
    abnormal = False
    for t in e.inputs + e.params + e.outputs:
        if t.kind != "tensor":
            continue
        if t.md5 is not None:
            self._modes["xor" if t.max is None and t.norm is None else "md5"] += 1
        elif t.max is not None or t.norm is not None:
            self._modes["statistics"] += 1
        if t.abnormal():
            abnormal = True
    for t in e.params:
        key = tensor_key(t)
        if key is not None:
            self.param_keys.add(key)
        if t.abnormal():
            self.abnormal_param_shapes.add(t.shape)
    if abnormal and e.name.base.rsplit(".", 1)[-1] not in _INIT_OPS:
        self.nonfinite += 1
        if e.name.is_module:
            if self.first_abnormal_module is None:
                self.first_abnormal_module = e
        elif self.first_abnormal is None:
            self.first_abnormal = e
    if self.first_order is None:
        self.first_order = e.order
    if e.name.direction == "forward":
        if self.first_loss_order is None and not e.name.is_module and api_family(e.name.base) == "loss":
            self.first_loss_order = e.order
    elif self.first_backward_order is None and e.name.direction == "backward":
        self.first_backward_order = e.order
    if self.keep_producers:
        for t in e.outputs:
            key = tensor_key(t)
            if key is not None:
                self.producers.add(key, e.order)


def process(self, a: Entry, b: Entry, how: str) -> None:
    res, run = self.res, self.res.run
    mode = self.mode_for(a, b)
    d = compare_api(a, b, mode)
    res.n_compared += 1
    if how == "fallback":
        res.n_fallback += 1
    if d.label == "error":
        res.n_error += 1
    elif d.label == "warning":
        res.n_warning += 1
    if d.diverged:
        res.n_diverged += 1
    out = d.out_err
    if math.isfinite(out):
        res.max_out_err = max(res.max_out_err, out)
    if run.nan_entry is a:
        res.nan_twin_abnormal = any(t.abnormal() for t in b.tensors())
    threshold = 0.0 if mode in ("exact", "md5") else DIVERGE
    in_hard = d.input_reasons() & {"dtype", "shape", "scalar_arg", "md5", "nonfinite"}
    flagged = d.diverged or d.in_err > threshold or bool(in_hard)
    if mode not in ("exact", "md5") and d.out_err > 0.01:
        res.weak_outputs[a.order] = d.out_err
    if not flagged:
        return
    cand = Candidate(a, b, d, how)
    if a.name.is_module:
        if res.first_module is None or a.order < res.first_module.a.order:
            res.first_module = cand
    elif res.first is None or a.order < res.first.a.order:
        res.first = cand


@contextlib.contextmanager
def reference_pipeline(monkeypatch):
    """The pre-issue-17 entry path in place of the fast one (one pass, reference reader)."""
    with monkeypatch.context() as m:
        m.setattr(dumpdir, "build_entry", build_entry)
        m.setattr(entries, "build_entry", build_entry)
        m.setattr(naming, "parse_entry_name", parse_entry_name)
        m.setattr(comparison.SideScan, "observe", observe)
        m.setattr(comparison._Pass, "process", process)
        yield
