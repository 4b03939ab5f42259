"""The training monitor's per-step statistics, localised like a module-level (L0) dump.

TrainerMon writes, for every iteration, the min/max/mean/norm of each module's inputs and outputs
(actv), of the gradients flowing through it (actv_grad), of each weight gradient (grad_reduced /
grad_unreduced) and of each parameter before the update (param_origin): the same statistics a
statistics dump holds for its module entries. Each step becomes a list of module entries in the
order the monitor wrote them (forward in completion order, then backward with each module's
weight gradients just before it), so the dump comparison and classification apply unchanged:
the first diverging module and step against the baseline (introduced / propagated / wiring /
weights / data input, and whether step N matched before step N+1 departed), the first difference
from a rerun, and the first Inf/NaN of a run on its own (operator output, weight, input) --
from the CSVs alone, with or without the monitor's anomaly.json.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from precdx.collectors.msprobe.comparison import PassResult, SideScan, compare_pairs
from precdx.collectors.msprobe.dumpdir import DumpHeader
from precdx.collectors.msprobe.entries import Entry, build_entry
from precdx.collectors.msprobe.localise import Located, classify_divergence, classify_nondeterminism, locate_first_nan
from precdx.collectors.msprobe.monitor import Table
from precdx.collectors.msprobe.naming import param_family
from precdx.collectors.msprobe.verdicts import _finite_stats_error

_IO = re.compile(r"^(?P<module>.*)\.(?P<io>input|output)(?:_(?P<i>\d+))?$")
_CLASS = "Monitored"   # stands for the class name a dump entry carries (the monitor has none)
_FAMILY = {"embedding": "embedding", "norm": "norm", "attention": "attention"}


@dataclass
class MonitorStep:
    """One step of one run as module entries (plain data)."""

    step: int
    entries: list[Entry]


def _stats_body(rec: dict[str, Any]) -> dict[str, Any] | None:
    """A monitor row as a dump tensor leaf; None for the 'no tensor' marker (every statistic and
    even shape/dtype NaN: the gradient of an input that has none, such as token ids)."""
    dtype = rec.get("_dtype")
    vals = [rec.get(k) for k in ("max", "min", "mean", "norm")]
    if dtype is None and all(v is None or (isinstance(v, float) and math.isnan(v)) for v in vals):
        return None
    return {"type": "torch.Tensor", "dtype": dtype, "shape": rec.get("_shape"),
            "Max": vals[0], "Min": vals[1], "Mean": vals[2], "Norm": vals[3]}


def _rows_by_step(table: Table | None) -> dict[int, list[tuple[str, dict]]]:
    out: dict[int, list[tuple[str, dict]]] = {}
    for (name, step), rec in (table or {}).items():
        out.setdefault(step, []).append((name, rec))
    return out


def _module_rows(rows: list[tuple[str, dict]]) -> list[tuple[str, dict[str, list], dict[str, list]]]:
    """(module, inputs by index, outputs by index) in the order the rows were written; the
    module is complete when its output rows are seen (a module writes input then output)."""
    order: list[str] = []
    ins: dict[str, dict[int, dict]] = {}
    outs: dict[str, dict[int, dict]] = {}
    for name, rec in rows:
        m = _IO.match(name)
        if not m:
            continue
        module, io, i = m["module"], m["io"], int(m["i"] or 0)
        if module not in ins and module not in outs:
            order.append(module)
        (ins if io == "input" else outs).setdefault(module, {})[i] = rec
    return [(mod, [ins.get(mod, {})[k] for k in sorted(ins.get(mod, {}))],
             [outs.get(mod, {})[k] for k in sorted(outs.get(mod, {}))]) for mod in order]


def _leaves(recs: list[dict]) -> list:
    return [_stats_body(r) for r in recs]


def _params_of(module: str, table_rows: list[tuple[str, dict]]) -> dict[str, Any]:
    prefix = f"{module}."
    out = {}
    for name, rec in table_rows:
        if name.startswith(prefix) and "." not in name[len(prefix):]:
            body = _stats_body(rec)
            if body is not None:
                out[name[len(prefix):]] = body
    return out


def monitor_steps(tables: dict[str, Table]) -> list[MonitorStep]:
    """The monitored steps of one run as module entries, in step order."""
    actv = _rows_by_step(tables.get("actv") or tables.get("module"))
    actv_grad = _rows_by_step(tables.get("actv_grad"))
    grads = _rows_by_step(tables.get("grad_reduced") or tables.get("grad_unreduced"))
    params = _rows_by_step(tables.get("param_origin"))
    updated = _rows_by_step(tables.get("param_updated"))
    out = []
    for step in sorted(set(actv) | set(actv_grad)):
        body: list[tuple[str, Any]] = []
        # the parameters a step computes with: recorded before its update, or (a step that never
        # reached its update, e.g. stopped on a NaN) as the previous update left them
        p_rows = params.get(step) or updated.get(step - 1, [])
        for module, ins, outs in _module_rows(actv.get(step, [])):
            if not module:
                continue   # the root model: a dump does not hold it either
            entry = {"input_args": _leaves(ins), "input_kwargs": {}, "output": _leaves(outs)}
            ps = _params_of(module, p_rows)
            if ps:
                entry["parameters"] = ps
            body.append((f"Module.{module}.{_CLASS}.forward.0", entry))
        g_rows = grads.get(step, [])
        for module, ins, outs in _module_rows(actv_grad.get(step, [])):
            if not module:
                continue
            pg = _params_of(module, g_rows)
            if pg:
                body.append((f"Module.{module}.{_CLASS}.parameters_grad.0", {k: [v] for k, v in pg.items()}))
            # a backward entry's input is the gradient w.r.t. the module's outputs
            body.append((f"Module.{module}.{_CLASS}.backward.0", {"input": _leaves(outs), "output": _leaves(ins)}))
        entries = [build_entry(name, b, i) for i, (name, b) in enumerate(body)]
        out.append(MonitorStep(step, entries))
    return out


_HEADER = DumpHeader(task="statistics", level="L0", framework="pytorch")


def _family(loc: Located) -> None:
    """Module families from the module path (embedding, norm, attention), else 'module'."""
    path = loc.api.split(".", 1)[1].rsplit(f".{_CLASS}.", 1)[0] if loc.api.startswith("Module.") else loc.api
    loc.module = path
    loc.family = _FAMILY.get(param_family(path), "module")
    loc.api_name = f"Module.{path}"


@dataclass
class MonitorFinding:
    """What the monitor comparison of one run found; `matched` the steps compared before it
    that matched module for module."""

    step: int
    located: Located
    result: PassResult
    matched: list[int]
    param_err: float = 0.0    # largest statistics error of the parameters the step computes with


def compare_monitors(run: list[MonitorStep], against: list[MonitorStep], *, exact: bool,
                     source: Path) -> MonitorFinding | None:
    """The first step (and module) where `run` departs from `against`; steps before it matched."""
    theirs = {s.step: s for s in against}
    matched: list[int] = []
    for mine in run:
        other = theirs.get(mine.step)
        if other is None:
            continue
        by_name = {e.name.full: e for e in other.entries}
        pairs = [(e, by_name.get(e.name.full)) for e in mine.entries]
        pr = compare_pairs(SideScan(source, _HEADER), SideScan(source, _HEADER), pairs, exact=exact)
        cand = pr.first or pr.first_module
        if cand is None:
            matched.append(mine.step)
            continue
        loc = classify_nondeterminism(cand) if exact else classify_divergence(cand, pr)
        _family(loc)
        return MonitorFinding(mine.step, loc, pr, matched, _param_error(pairs))
    return None


def _param_error(pairs: list[tuple[Entry, Entry | None]]) -> float:
    worst = 0.0
    for a, b in pairs:
        if b is None:
            continue
        for x, y in zip(a.params, b.params):
            e = _finite_stats_error(x, y) if x.kind == y.kind == "tensor" else None
            if e is not None:
                worst = max(worst, e[0])
    return worst


def first_nan(run: Iterable[MonitorStep], source: Path) -> tuple[int, Located] | None:
    """The first Inf/NaN of one run's monitor (step, location)."""
    for st in run:
        scan = SideScan(source, _HEADER)
        for e in st.entries:
            scan.observe(e)
        scan.finish()
        loc = locate_first_nan(scan)
        if loc is not None:
            _family(loc)
            return st.step, loc
    return None
