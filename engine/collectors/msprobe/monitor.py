"""msprobe training monitor outputs: v1 (`<ts>-rank<r>-<id>/<table>_<a>-<b>.csv`), v2
(`rank_<r>/<table>_step<a>-<b>.csv`) and alert files (anomaly.json / anomaly_analyse.json);
and comparing one run's per-parameter statistics with another run's, step by step."""
from __future__ import annotations

import math
import re
import statistics
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from precdx.collectors.msprobe.csvtext import csv_dicts, csv_text
from precdx.collectors.msprobe.jsonstream import load_small_json
from precdx.collectors.msprobe.naming import param_family
from precdx.errors import PrecdxError, Warnings

_V1_FILE = re.compile(r"^(?P<table>[a-z_]+?)_(?P<a>\d+)-(?P<b>\d+)\.csv$")
_V2_FILE = re.compile(r"^(?P<table>[a-z_]+?)_step(?P<a>\d+)-(?P<b>\d+)\.csv$")
_RANK_DIR = re.compile(r"(?:-rank|^rank_)(\d+)")
_ALERT = re.compile(r"Rule (?P<rule>\w+) reports anomaly signal in \('(?P<tag>[^']+)', '(?P<op>[^']+)'\) at step "
                    r"(?P<step>\d+), current value (?P<value>[^,]+)")
# A parameter departs when its run/baseline ratio is off by more than 10 %.
DEPART = math.log(1.1)
LATE_GROWTH = 1.5

Table = dict  # (name, step) -> {stat: float}
# Name parts that say which tensor of a module is meant, not which module.
_TENSOR_SUFFIXES = {"input", "output", "weight", "bias", "grad_input", "grad_output", "exp_avg",
                    "exp_avg_sq", "param_origin", "param_updated"}
_CALL = re.compile(r"_call_(\d+)$")
_INPUT_TAIL = re.compile(r"\.input(_\d+)?$")


def monitor_table_of(path: Path) -> tuple[str, int] | None:
    """(table, rank) from a monitor CSV path, e.g. ('grad_reduced', 0)."""
    m = _V1_FILE.match(path.name) or _V2_FILE.match(path.name)
    if not m:
        return None
    r = _RANK_DIR.search(path.parent.name)
    return m["table"], int(r.group(1)) if r else 0


def _float(text: str | None) -> float | None:
    if text is None or text == "":
        return None
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def _step(text: str | None) -> int | None:
    """A step number: a whole, finite, non-negative number ('3', '3.0'); None otherwise."""
    v = _float(text)
    if v is None or not math.isfinite(v) or v < 0 or v != int(v):
        return None
    return int(v)


def _shape_of(text) -> list[int] | None:
    """'[2, 8, 16]' -> [2, 8, 16]; None when the cell is no shape ('nan' for a missing tensor)."""
    if not isinstance(text, str) or not text.startswith("["):
        return None
    try:
        return [int(x) for x in text.strip("[] ").split(",") if x.strip()]
    except ValueError:
        return None


def read_monitor_csv(path: Path, into: dict[str, Table], warnings: Warnings) -> None:
    """Add one CSV's rows to `into[table]`; v2 weight_grad rows go to grad_<scope>."""
    meta = monitor_table_of(path)
    if meta is None:
        return
    table = meta[0]
    text = csv_text(path, what="a monitor CSV", encoding="utf-8")
    fields, rows = csv_dicts(text, path, warnings, what=f"monitor table {table}")
    name_col = "name" if "name" in fields else "module_name" if "module_name" in fields else None
    if name_col is None or "step" not in fields:
        raise PrecdxError("monitor CSV without name/step columns", path=str(path))
    stats = [c for c in fields if c in ("min", "max", "mean", "norm", "nans", "zeros")]
    if not rows:
        warnings.add(f"monitor table {table} has no data rows (header only): nothing to compare",
                     path=str(path))
    elif "norm" not in fields:
        warnings.add(f"monitor table {table} has no 'norm' column: its parameters cannot be compared "
                     "with the baseline by norm", path=str(path))
    bad = 0
    for row in rows:
        step = _step(row.get("step"))
        name = row.get(name_col)
        if step is None or not name or not isinstance(name, str):
            bad += 1
            continue
        tname = table
        if table == "weight_grad" and row.get("scope"):
            tname = f"grad_{row['scope']}"
        elif table in ("module", "param", "optimizer") and row.get("scope"):
            name = f"{name}.{row['scope']}" if table != "param" else name
            tname = f"{table}_{row['scope']}" if table == "param" else table
        rec = into.setdefault(tname, {}).setdefault((name, step), {})
        for c in stats:
            v = _float(row.get(c))
            if v is not None:
                rec[c] = v
        dtype, shape = row.get("dtype"), _shape_of(row.get("shape"))
        if isinstance(dtype, str) and dtype.startswith("torch."):
            rec["_dtype"] = dtype
        if shape is not None:
            rec["_shape"] = shape
    if bad:
        warnings.add(f"{bad} monitor rows without step or name were skipped", path=str(path))


@dataclass
class MonitorComparison:
    """What grad_monitor_compare reports for one table and statistic."""

    metric: str
    n_params: int
    n_steps: int
    departs: bool
    first_step: int | None = None
    param: str | None = None
    ratio: float | None = None
    max_ratio: float | None = None
    common_mode: bool | None = None
    late_growth: bool | None = None
    nonfinite_step: int | None = None

    @property
    def family(self) -> str | None:
        return param_family(self.param) if self.param else None


def compare_tables(run: Table, base: Table, table: str, stat: str = "norm") -> MonitorComparison | None:
    """Find the first step where a parameter's statistic departs from the baseline, judged
    against the common trend of all parameters at that step (a global scale such as gradient
    clipping moves every parameter together and is reported as common_mode)."""
    keys = set(run) & set(base)
    params = sorted({n for n, _ in keys})
    steps = sorted({s for _, s in keys})
    if not params or not steps:
        return None
    res = MonitorComparison(f"{table}.{stat}", len(params), len(steps), False)
    for s in sorted({s for _, s in run}):
        if any(not math.isfinite(v.get(stat, 0.0)) or v.get("nans", 0.0) > 0
               for (n, st), v in run.items() if st == s):
            res.nonfinite_step = s
            break
    for s in steps:
        logs: dict[str, float] = {}
        for p in params:
            a = run.get((p, s), {}).get(stat)
            b = base.get((p, s), {}).get(stat)
            if a is None or b is None or not math.isfinite(a) or not math.isfinite(b) or a <= 0 or b <= 0:
                continue
            logs[p] = math.log(a / b)
        if not logs:
            continue
        med = statistics.median(logs.values())
        outlier = max(logs, key=lambda p: abs(logs[p] - med))
        spread = abs(logs[outlier] - med)
        n_off = sum(1 for v in logs.values() if abs(v) > DEPART)
        if spread > DEPART or abs(med) > DEPART:
            res.departs = True
            res.first_step = s
            res.common_mode = n_off >= max(2, len(logs) // 2)
            res.param = outlier if spread > DEPART else max(logs, key=lambda p: abs(logs[p]))
            res.ratio = math.exp(logs[res.param])
            break
    if res.param:
        ratios = [run[(res.param, s)][stat] / base[(res.param, s)][stat] for s in steps
                  if (res.param, s) in run and (res.param, s) in base
                  and base[(res.param, s)].get(stat) and run[(res.param, s)].get(stat) is not None]
        finite = [r for r in ratios if math.isfinite(r)]
        res.max_ratio = max(finite, key=lambda r: abs(math.log(r)) if r > 0 else math.inf) if finite else None
        res.late_growth = _late_growth(run, base, res.param, steps, stat)
    return res


def _late_growth(run: Table, base: Table, param: str, steps: list[int], stat: str) -> bool | None:
    if len(steps) < 8:
        return None
    q = max(1, len(steps) // 4)

    def mean(t: Table, ss: list[int]) -> float | None:
        vals = [t[(param, s)][stat] for s in ss if (param, s) in t and stat in t[(param, s)]
                and math.isfinite(t[(param, s)][stat])]
        return sum(vals) / len(vals) if vals else None

    r_early, r_late = mean(run, steps[:q]), mean(run, steps[-q:])
    b_early, b_late = mean(base, steps[:q]), mean(base, steps[-q:])
    if not r_early or not r_late or not b_early or not b_late:
        return None
    return r_late / r_early > LATE_GROWTH and b_late / b_early < LATE_GROWTH


@dataclass
class Alert:
    """One monitor alert record."""

    rank: int
    step: int
    rule: str
    tag: str
    target: str
    table: str
    value: float | None
    call: int | None = None

    @property
    def module(self) -> str:
        """Module (or parameter owner) the alert is about: block.mlp.fc1 for block.mlp.fc1.output,
        block.mlp.fc1.weight or block.mlp.fc1.output.0 (v2)."""
        parts = [p for p in self.target.split(".") if p]
        while parts and (parts[-1].isdigit() or re.sub(r"_\d+$", "", parts[-1]) in _TENSOR_SUFFIXES):
            parts.pop()
        return ".".join(parts) or "(model input)"

    @property
    def category(self) -> str:
        t = self.table
        if t == "actv" or t == "module":
            return "activation"
        if t == "actv_grad":
            return "activation_grad"
        if t.startswith("grad") or t in ("weight_grad", "post_grad", "pre_grad", "acc_grad"):
            return "gradient"
        if t.startswith("exp_avg") or t == "optimizer":
            return "optimizer_state"
        if t.startswith("param"):
            return "parameter"
        return "other"

    @property
    def benign(self) -> bool:
        # the gradient of a model input that has none (token ids, the root input) is always NaN
        # (the root input, or the embedding's input: integer token ids)
        if self.table != "actv_grad" or not _INPUT_TAIL.search(self.target):
            return False
        # the model's own inputs (".input", or ".input_0", ".input_1" ... when it takes several)
        return self.target.startswith(".input") or "embed" in self.target.lower()


def read_alerts(path: Path) -> list[Alert]:
    """Records of anomaly.json / anomaly_analyse.json (dict keyed by tag, or a list)."""
    data = load_small_json(path, what="monitor anomaly json")
    records = data.values() if isinstance(data, dict) else data if isinstance(data, list) else None
    if records is None:
        raise PrecdxError("expected a JSON object or list of alert records", path=str(path))
    out = []
    for rec in records:
        if not isinstance(rec, dict):
            continue
        msg = str(rec.get("message", ""))
        m = _ALERT.search(msg)
        tag = str(rec.get("tag_name") or (m["tag"] if m else ""))
        parts = tag.split("/")
        inner = parts[0].split(":")
        target = inner[1] if len(inner) >= 2 else parts[0]
        table = parts[-1] if len(parts) > 1 else ""
        try:
            value = float(m["value"]) if m else None
        except ValueError:
            value = None
        step = rec.get("step", m["step"] if m else 0)
        call = rec.get("call_id")
        if not isinstance(call, int) or isinstance(call, bool):
            key = next((k for k, v in data.items() if v is rec), "") if isinstance(data, dict) else ""
            mc = _CALL.search(str(key))
            call = int(mc.group(1)) if mc else None
        try:
            rank, step_n = int(rec.get("rank", 0) or 0), int(step or 0)
        except (TypeError, ValueError):
            continue
        out.append(Alert(rank=rank, step=step_n, rule=m["rule"] if m else "unknown", tag=tag,
                         target=target, table=table, value=value, call=call))
    return out


def group_tables(paths: list[Path], warnings: Warnings) -> dict[str, Table]:
    """Read every monitor CSV of one run (rank 0 only when several ranks: tables compare
    like-for-like ranks; other ranks are read when rank 0 is absent)."""
    by_rank: dict[int, list[Path]] = defaultdict(list)
    for p in paths:
        meta = monitor_table_of(p)
        if meta:
            by_rank[meta[1]].append(p)
    if not by_rank:
        return {}
    rank = min(by_rank)
    tables: dict[str, Table] = {}
    for p in sorted(by_rank[rank]):
        try:
            read_monitor_csv(p, tables, warnings)
        except PrecdxError as exc:
            warnings.add(exc.message, path=str(p))
    return tables


_NONFINITE_STATS = ("min", "max", "mean", "norm")
# weight gradients are alerted as post_grad (reduced) / acc_grad (before the reduction)
_ALERT_TABLE = {"grad_reduced": "post_grad", "grad_unreduced": "acc_grad"}
MAX_DERIVED = 200


def derive_alerts(tables: dict[str, Table]) -> list[Alert]:
    """Alerts of msprobe's AnomalyNan rule, worked out from the per-step CSVs of a run whose
    monitor wrote no anomaly.json: every row with a NaN count or a non-finite statistic (the
    'no tensor' rows of inputs without a gradient come out benign, as the real tool's do). The
    call order is the row's position within its step across the tables, forward first."""
    out: list[Alert] = []
    calls: dict[str, int] = {}
    for table in ("actv", "module", "actv_grad", "grad_unreduced", "grad_reduced", "weight_grad",
                  "exp_avg", "exp_avg_sq", "optimizer", "param_origin", "param_updated", "param"):
        kind = _ALERT_TABLE.get(table, table)   # the tag TrainerMon's alerts use for that table
        for (name, step), rec in (tables.get(table) or {}).items():
            tag = f"0:{name}:0/rank0/{kind}" if table in ("actv", "actv_grad") else f"0:{name}/rank0/{kind}"
            call = calls.setdefault(tag, len(calls))
            vals = [rec.get(k) for k in _NONFINITE_STATS]
            bad = [v for v in vals if v is not None and not math.isfinite(v)]
            if not bad and not rec.get("nans"):
                continue
            value = bad[0] if bad else float("nan")
            out.append(Alert(rank=0, step=step, rule="AnomalyNan", tag=tag, target=name, table=kind,
                             value=value, call=call))
            if len(out) >= MAX_DERIVED:
                return out
    return out
