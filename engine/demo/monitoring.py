"""The demo's training monitor: per-iteration statistics of activations, activation gradients,
weight gradients, optimizer moments and parameters, written in the layout of msprobe's
TrainerMon ("monitor v1", shared/msprobe-formats.md section 10):

    monitor_output/<Mon>DD_HH-MM-SS-rank0-<8 hex>/<table>_<first>-<last>.csv  (+ stack_info.csv)
    monitor_output/anomaly_detected/rank0/anomaly.json                       (alerts, optional)

Tables: actv / actv_grad (header ``vpp_stage,name,step,micro_step,min,max,mean,norm,nans,zeros,
shape,dtype``; names ``<module>.input`` / ``<module>.output``, ``_<i>`` per tensor when a module
has several), grad_unreduced / grad_reduced / exp_avg / exp_avg_sq / param_origin /
param_updated (``vpp_stage,name,step,min,...``). Names are squashed like TrainerMon does
(``module.module.decoder.layers.0.mlp`` -> ``layers.0.mlp``). Alerts follow its AnomalyNan rule
(threshold 1e10): every non-finite or huge statistic, including the gradients of integer model
inputs that never have one (as the real tool reports them on clean runs too).
"""
from __future__ import annotations

import csv
import datetime as dt
import json
import math
import random
import re
from pathlib import Path
from typing import Any

import torch

OPS = ("min", "max", "mean", "norm", "nans", "zeros")
EPS = 1e-8
NDIGITS = 8
NAN_THRESHOLD = 1e10
_SQUASH = (r"^.*\.(layers?\..*)", r"^.*\.(embeddings?\..*)", r"^.*\.(final.*)", r"^.*\.(output.*)",
           r"^.*\.(norm.*)")
_ACTV_HEADER = ["vpp_stage", "name", "step", "micro_step", *OPS, "shape", "dtype"]
_PARAM_HEADER = ["vpp_stage", "name", "step", *OPS, "shape", "dtype"]
TABLES = ("actv", "actv_grad", "grad_unreduced", "grad_reduced", "exp_avg", "exp_avg_sq",
          "param_origin", "param_updated")


def squash(name: str) -> str:
    """TrainerMon's squash_param_name: keep the part of a parameter/module path from its
    'layers.' / 'embedding.' / 'final' / 'output' / 'norm' component on."""
    for pattern in _SQUASH:
        m = re.findall(pattern, name)
        if m:
            return m[0]
    return name


def _stats(t: torch.Tensor | None) -> list[Any]:
    if t is None:
        return ["nan"] * (len(OPS) + 2)
    with torch.no_grad():
        x = t.detach()
        if x.dtype == torch.bool or not x.dtype.is_floating_point:
            x = x.to(torch.float64)
        else:
            x = x.to(torch.float32)
        if x.numel() == 0:
            return ["nan"] * (len(OPS) + 2)
        vals = [float(x.min()), float(x.max()), float(x.mean()), float(x.norm()),
                int(torch.isnan(x).sum()), float((x.abs() < EPS).float().mean())]
    out: list[Any] = []
    for v in vals:
        if isinstance(v, int):
            out.append(v)
        elif math.isnan(v):
            out.append("nan")
        elif math.isinf(v):
            out.append("inf" if v > 0 else "-inf")
        else:
            out.append(round(v, NDIGITS))
    return out + [str(list(t.shape)), str(t.dtype)]


def _tensors(obj: Any) -> list[torch.Tensor | None]:
    if isinstance(obj, torch.Tensor) or obj is None:
        return [obj]
    if isinstance(obj, (list, tuple)):
        return [x for x in obj if isinstance(x, torch.Tensor) or x is None]
    return []


class TrainingMonitor:
    """Hooks a model and its optimizer and writes the tables as TrainerMon would."""

    def __init__(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, out_dir: Path, *,
                 record_steps: int = 1, alerts: bool = True, started: float | None = None, tag: int = 0,
                 grad_reduce=None) -> None:
        self.model, self.optimizer = model, optimizer
        when = dt.datetime.fromtimestamp(started) if started is not None else dt.datetime.now()
        hexid = f"{random.Random(tag).getrandbits(32):08x}"
        self.root = Path(out_dir)
        self.dir = self.root / f"{when.strftime('%b%d_%H-%M-%S')}-rank0-{hexid}"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.record_steps = max(1, record_steps)
        self.alerts = alerts
        self.rows: dict[str, list[list[Any]]] = {t: [] for t in TABLES}
        self.pending: list[tuple[str, str, int, bool, Any]] = []
        self.anomalies: dict[str, dict[str, Any]] = {}
        self.call_ids: dict[str, int] = {}
        self.step = 0
        self.chunk_start = 0
        self.handles: list[Any] = []
        self.names = {id(p): squash(n) for n, p in model.named_parameters()}
        self.stack_rows: list[tuple[str, str]] = []
        root = model
        while hasattr(root, "module") and isinstance(root.module, torch.nn.Module) and \
                len(list(root.children())) == 1:
            root = root.module
        for name, mod in root.named_modules():
            mname = squash(name) if name else ""
            self.handles.append(mod.register_forward_hook(self._fwd(mname), with_kwargs=True))
            self.handles.append(mod.register_full_backward_hook(self._bwd(mname)))
            self.stack_rows.append((f"0:{mname}", f"File {type(mod).__module__}, in {type(mod).__name__}.forward"))

    # ---- hooks ------------------------------------------------------------------------------
    def _fwd(self, mname: str):
        def hook(module, args, kwargs, output):
            if not module.training:
                return
            ins = [a for a in args if isinstance(a, torch.Tensor)] + \
                  [v for v in kwargs.values() if isinstance(v, torch.Tensor)]
            self._add("actv", f"{mname}.input", ins, micro=True)
            self._add("actv", f"{mname}.output", _tensors(output), micro=True)
        return hook

    def _bwd(self, mname: str):
        def hook(module, grad_input, grad_output):
            self._add("actv_grad", f"{mname}.input", _tensors(grad_input), micro=True)
            self._add("actv_grad", f"{mname}.output", _tensors(grad_output), micro=True)
        return hook

    def _add(self, table: str, name: str, tensors: list[torch.Tensor | None], micro: bool = False) -> None:
        """Keep the tensors; their statistics are computed at the end of the step, outside any
        dump window (a probe recording the step must not see the monitor's own arithmetic)."""
        if not tensors:
            return
        names = [name] if len(tensors) == 1 else [f"{name}_{i}" for i in range(len(tensors))]
        for n, t in zip(names, tensors):
            self.pending.append((table, n, self.step, micro, t))

    def _settle(self) -> None:
        for table, n, step, micro, t in self.pending:
            stats = _stats(t)
            self.rows[table].append([0, n, step] + ([0] if micro else []) + stats)
            self._alert(table, n, stats)
        self.pending.clear()

    def _alert(self, table: str, name: str, stats: list[Any]) -> None:
        kind = {"grad_reduced": "post_grad", "grad_unreduced": "acc_grad"}.get(table, table)   # TrainerMon's tags
        tag = f"0:{name}:0/rank0/{kind}" if table in ("actv", "actv_grad") else f"0:{name}/rank0/{kind}"
        call = self.call_ids.setdefault(tag, len(self.call_ids))
        if not self.alerts:
            return
        vals = stats[: len(OPS)]
        hit = None
        if all(v == "nan" for v in vals):
            hit = ("zeros", "nan")
        else:
            for op, v in zip(OPS, vals):
                if v in ("nan", "inf", "-inf") or (isinstance(v, float) and abs(v) > NAN_THRESHOLD):
                    hit = (op, v)
                    break
        if hit is None:
            return
        op, v = hit
        key = f"{tag}_step_{self.step}_call_{call}"
        self.anomalies.setdefault(key, {
            "rank": 0, "step": self.step, "micro_step": 0, "pp_stage": 0, "vpp_stage": 0, "call_id": call,
            "tag_name": tag,
            "message": f"Rule AnomalyNan reports anomaly signal in ('{tag}', '{op}') at step {self.step}, "
                       f"current value {v}, history mean nan.",
            "group_mates": [0]})

    # ---- training-loop calls ------------------------------------------------------------------
    def begin_step(self, step: int) -> None:
        self.step = step

    def after_backward(self, step: int) -> None:
        self._settle()
        for p in self.model.parameters():
            name = self.names[id(p)]
            for table in ("grad_unreduced", "grad_reduced"):
                self._add(table, name, [p.grad])
        self._settle()

    def before_update(self, step: int) -> None:
        for p in self.model.parameters():
            self._add("param_origin", self.names[id(p)], [p])
        self._settle()

    def end_step(self, step: int, optimizer: torch.optim.Optimizer, *, updated: bool) -> None:
        self._settle()
        if updated:
            for p in self.model.parameters():
                name = self.names[id(p)]
                self._add("param_updated", name, [p])
                state = optimizer.state.get(p, {})
                if step >= 1 and "exp_avg" in state:
                    self._add("exp_avg", name, [state["exp_avg"]])
                    self._add("exp_avg_sq", name, [state["exp_avg_sq"]])
        self._settle()
        if (step + 1 - self.chunk_start) >= self.record_steps:
            self._flush(step)

    def _flush(self, last: int) -> None:
        for table, rows in self.rows.items():
            if not rows:
                continue
            path = self.dir / f"{table}_{self.chunk_start}-{last}.csv"
            with path.open("w", newline="", encoding="utf-8") as fh:
                w = csv.writer(fh)
                w.writerow(_ACTV_HEADER if table in ("actv", "actv_grad") else _PARAM_HEADER)
                w.writerows(rows)
            rows.clear()
        self.chunk_start = last + 1

    def close(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles.clear()
        if any(self.rows.values()):
            self._flush(self.step)
        with (self.dir / "stack_info.csv").open("w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh)
            w.writerow(["module_name", "stack_info"])
            w.writerows(self.stack_rows)
        if self.alerts and self.anomalies:
            out = self.root / "anomaly_detected" / "rank0"
            out.mkdir(parents=True, exist_ok=True)
            (out / "anomaly.json").write_text(json.dumps(self.anomalies, indent=1) + "\n", encoding="utf-8")
