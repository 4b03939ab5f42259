"""Per-API check outputs of msprobe: API pre-check (`accuracy_checking_result_*.csv` of
acc_check / run_ut, `api_precision_compare_result_*.csv`) and free-benchmark (`free_benchmark.csv`)."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from precdx.collectors.msprobe.csvtext import csv_dicts, csv_text

# free-benchmark relative-error thresholds per dtype (msprobe free_benchmark docs)
FREE_BENCHMARK_THRESHOLDS = {"float16": 0.002, "bfloat16": 0.004, "float32": 0.0002}
_STATUS = {"pass": "pass", "true": "pass", "warning": "warning", "error": "error", "false": "error",
           "skip": "skip", "n/a": "skip", "": "unknown"}
_API_INDEX = re.compile(r"^(?P<base>.+?)\.(?P<index>\d+)(?:\.(?:forward|backward))?$")


def _rows(path: Path) -> list[dict[str, str]]:
    """Rows as dicts; damaged CSV (binary, a cell csv cannot read) raises PrecdxError naming the
    file and line."""
    return csv_dicts(csv_text(path, what="a CSV"), path, None)[1]


def api_base(name: str) -> str:
    """`Functional.gelu.0.forward` / `Functional.gelu.0` -> `Functional.gelu`."""
    m = _API_INDEX.match(name.strip())
    return m["base"] if m else name.strip()


@dataclass
class PrecheckLine:
    api: str
    forward: str
    backward: str
    message: str | None


def read_precheck(path: Path) -> list[PrecheckLine]:
    """acc_check / run_ut result CSV (`API name`/`API Name`, `Forward Test Success`, ...)."""
    out = []
    for row in _rows(path):
        norm = {k.strip().lower(): (v or "").strip() for k, v in row.items() if k}
        api = norm.get("api name") or norm.get("api_name")
        if not api:
            continue
        fwd = _STATUS.get(norm.get("forward test success", "").lower(), "unknown")
        bwd = _STATUS.get(norm.get("backward test success", "").lower(), "unknown")
        if "forward test success" not in norm:
            # api_precision_compare result: one verdict column (Chinese header 比对结果 or Status)
            verdict = norm.get("比对结果") or norm.get("status") or norm.get("result") or ""
            fwd = _STATUS.get(verdict.lower(), "unknown")
        out.append(PrecheckLine(api, fwd, bwd, norm.get("message") or None))
    return out


@dataclass
class FreeBenchmarkLine:
    rank: int
    step: int
    api: str
    stage: str
    pert_mode: str
    max_rel: float | None
    dtype: str
    threshold: float | None

    @property
    def exceeds(self) -> bool:
        return self.max_rel is not None and self.threshold is not None and self.max_rel > self.threshold


def read_free_benchmark(path: Path) -> list[FreeBenchmarkLine]:
    """free_benchmark.csv rows (rank, pert_mode, stage, step, api_name, max_rel, dtype, ...)."""
    out = []
    for row in _rows(path):
        api = (row.get("api_name") or "").strip()
        if not api:
            continue
        try:
            max_rel = float(row.get("max_rel") or "nan")
        except ValueError:
            max_rel = None
        dtype = (row.get("dtype") or "").strip()
        short = dtype.replace("torch.", "")
        try:
            rank = int(float(row.get("rank") or 0))
            step = int(float(row.get("step") or 0))
        except (ValueError, OverflowError):  # 'abc', 'inf', 'nan' 
            rank, step = 0, 0
        out.append(FreeBenchmarkLine(rank, step, api, (row.get("stage") or "").strip() or "forward",
                                     (row.get("pert_mode") or "").strip() or "unknown", max_rel, dtype,
                                     FREE_BENCHMARK_THRESHOLDS.get(short)))
    return out
