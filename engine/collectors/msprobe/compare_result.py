"""msprobe compare results (`compare_result_*.csv`, `.xlsx`; statistics, md5, tensor and the 2023
ptdbg_ascend layout): per-API labels, counts, and the first API msprobe flagged."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from engine.collectors.msprobe.csvtext import csv_rows, csv_text
from engine.collectors.msprobe.naming import api_family, parse_entry_name
from engine.errors import PrecdxError, Warnings

_ROW_API = re.compile(r"^(?P<api>.+?\.(?:forward|backward|parameters_grad)(?:\.\d+)?)\.(?:input|output|parameters)\b")
_LEGACY_API = re.compile(r"^(?P<base>.+)_(?P<index>\d+)_(?P<dir>forward|backward)(?:_|$)")
_RANK = re.compile(r"compare_result_rank(\d+)")
_STEP = re.compile(r"^step(\d+)$")
_LABEL_ORDER = {"pass": 0, "warning": 1, "error": 2}


@dataclass
class ApiRows:
    """All rows of one API in a compare result."""

    api: str
    first_row: int
    label: str = "pass"
    in_err: float = 0.0
    out_err: float = 0.0
    unmatched: bool = False
    nonfinite: bool = False
    dtype: str | None = None
    messages: list[str] = field(default_factory=list)


@dataclass
class CompareResult:
    """A parsed compare result file."""

    path: Path
    mode: str
    n_rows: int
    apis: list[ApiRows]
    rank: int | None
    step: int | None

    def first_flagged(self) -> ApiRows | None:
        for label in ("error", "warning"):
            for a in self.apis:
                if a.label == label and not a.unmatched:
                    return a
        return None


def _row_api(name: str) -> str | None:
    m = _ROW_API.match(name)
    if m:
        return m["api"]
    m = _LEGACY_API.match(name)
    if m:  # Functional_linear_0_forward_input.0 -> Functional.linear.0.forward
        base = m["base"].replace("_", ".", 1)
        return f"{base}.{m['index']}.{m['dir']}"
    return None


def _ratio(text: str | None) -> float | None:
    """'12.5%' -> 0.125; numbers as they are; 'N/A'/'unsupported'/'None' -> None; 'Nan'/'inf'."""
    if text is None:
        return None
    t = str(text).strip()
    if not t or t.upper() in ("N/A", "NONE", "UNSUPPORTED", "-"):
        return None
    pct = t.endswith("%")
    try:
        v = float(t.rstrip("%"))
    except ValueError:
        return None
    return v / 100.0 if pct else v


def _mode(header: list[str]) -> str:
    h = set(header)
    if "NPU MD5" in h:
        return "md5"
    if "Accuracy Reached or Not" in h:
        return "legacy"
    if "Cosine" in h and ("EucDist" in h or "One Thousandth Err Ratio" in h):
        return "tensor"
    return "statistics"


def _rows_from_xlsx(path: Path, warnings: Warnings) -> list[list[str]] | None:
    try:
        import openpyxl  # optional: only needed for --xlsx outputs
    except ImportError:
        warnings.add("cannot read .xlsx compare results: the openpyxl package is not installed "
                     "(pip install openpyxl, or use msprobe's CSV output)", path=str(path))
        return None
    try:
        wb = openpyxl.load_workbook(path, read_only=True, data_only=True)
    except Exception as exc:
        raise PrecdxError(f"not a readable .xlsx workbook ({type(exc).__name__})", path=str(path)) from None
    ws = wb.worksheets[0]
    rows = [["" if v is None else str(v) for v in row] for row in ws.iter_rows(values_only=True)]
    wb.close()
    return rows


def _rows_from_csv(path: Path, warnings: Warnings) -> list[list[str]]:
    text = csv_text(path, what="a CSV compare result")
    return csv_rows(text, path, warnings, what="the compare_result file")


# Columns a layout's verdicts are read from (without them every API silently reads as 'pass').
_REQUIRED = {"statistics": ("NormRelativeErr", "Result"), "md5": ("Result",),
             "tensor": ("Cosine", "Result"), "legacy": ("Accuracy Reached or Not",)}


def read_compare_result(path: Path, warnings: Warnings) -> CompareResult | None:
    """Parse one compare result; None (with a warning) when it cannot be used."""
    rows = (_rows_from_xlsx(path, warnings) if path.suffix.lower() == ".xlsx"
            else _rows_from_csv(path, warnings))
    if rows is None:
        return None
    if not rows or "NPU Name" not in rows[0]:
        raise PrecdxError("no 'NPU Name' header: not an msprobe compare result", path=str(path))
    header = rows[0]
    col = {name: i for i, name in enumerate(header)}
    mode = _mode(header)
    if not any(any(r) for r in rows[1:]):
        warnings.add("the compare_result file has no data rows (header only): no API verdicts from it",
                     path=str(path))
    missing = [c for c in _REQUIRED[mode] if c not in col]
    if missing:
        warnings.add(f"the compare_result file lacks the column(s) {', '.join(missing)}: "
                     "its API verdicts are incomplete", path=str(path))
    apis: dict[str, ApiRows] = {}
    short_rows = 0
    for n, row in enumerate(rows[1:], start=2):
        if not any(row):
            continue
        if len(row) < len(header):
            short_rows += 1
            row = row + [""] * (len(header) - len(row))
        get = lambda c: row[col[c]] if c in col else None  # noqa: E731
        name = get("NPU Name") or get("Bench Name") or ""
        api = _row_api(name)
        if api is None:
            continue
        rec = apis.get(api)
        if rec is None:
            rec = apis[api] = ApiRows(api, n)
        label = (get("Result") or "").strip().lower()
        if mode == "legacy":
            reached = (get("Accuracy Reached or Not") or "").strip().lower()
            label = {"yes": "pass", "no": "error"}.get(reached, "pass")
        if label in ("diff", "different"):
            label = "error"
        if label in _LABEL_ORDER and _LABEL_ORDER[label] > _LABEL_ORDER[rec.label]:
            rec.label = label
        if (get("Bench Name") or "").strip().upper() == "N/A":
            rec.unmatched = True
        err = _ratio(get("NormRelativeErr"))
        if err is None and mode == "tensor":
            cos = _ratio(get("Cosine"))
            err = None if cos is None else (1.0 - cos if math.isfinite(cos) else math.inf)
        is_output = ".output" in name[len(api):] or "_output" in name
        if err is not None:
            err = math.inf if math.isnan(err) else err
            if is_output:
                rec.out_err = max(rec.out_err, err)
            else:
                rec.in_err = max(rec.in_err, err)
        for stat in ("NPU max", "NPU min"):
            v = _ratio(get(stat))
            if v is not None and not math.isfinite(v):
                rec.nonfinite = True
        if rec.dtype is None and is_output:
            rec.dtype = get("NPU Dtype") or get("NPU Tensor Dtype")
        msg = (get("Err_message") or "").strip()
        if msg and msg not in ("[]", "") and msg not in rec.messages:
            rec.messages.append(msg)
    if short_rows:
        warnings.add(f"{short_rows} rows have fewer columns than the header (file cut short?)", path=str(path))
    m = _RANK.search(path.name)
    step = None
    for part in reversed(path.parts[:-1]):
        ms = _STEP.match(part)
        if ms:
            step = int(ms.group(1))
            break
    return CompareResult(path, mode, max(len(rows) - 1, 0), list(apis.values()),
                         int(m.group(1)) if m else None, step)


def api_kind(rec: ApiRows) -> str:
    """introduced / propagated from msprobe's row errors (unknown without numbers)."""
    if any("scalar parameters" in m or "dtype" in m for m in rec.messages):
        return "introduced"   # the call itself differs (an argument such as eps, or its precision)
    if rec.in_err == 0.0 and rec.out_err == 0.0:
        return "unknown"
    # msprobe's own criteria for an operator that adds error: output >> input
    if (rec.in_err < 0.1 and rec.out_err > 0.5) or rec.out_err > 10 * rec.in_err:
        return "introduced"
    return "propagated"


def describe(rec: ApiRows) -> tuple[str, str, str]:
    """(api_name, family, direction) of a compare-result API."""
    p = parse_entry_name(rec.api)
    direction = p.direction if p.direction in ("forward", "backward", "parameters_grad") else "forward"
    return p.base, api_family(p.base), direction

