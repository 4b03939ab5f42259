"""msprobe compare results (`compare_result_*.csv`, `.xlsx`; statistics, md5, tensor and the 2023
ptdbg_ascend layout): per-API labels, counts, and the first API msprobe flagged."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from precdx.collectors.msprobe.context import user_frame
from precdx.collectors.msprobe.csvtext import csv_rows, csv_text
from precdx.collectors.msprobe.entries import Entry, TensorInfo
from precdx.collectors.msprobe.naming import api_family, module_path_of, parse_entry_name
from precdx.errors import PrecdxError, Warnings

_ROW_API = re.compile(r"^(?P<api>.+?\.(?:forward|backward|parameters_grad)(?:\.\d+)?)\.(?P<slot>(?:input|output|parameters)\b.*)$")
_ROW_GRAD = re.compile(r"^(?P<api>.+\.parameters_grad\.\d+)\.(?P<param>[^.]+)$")
_LEGACY_API = re.compile(r"^(?P<base>.+)_(?P<index>\d+)_(?P<dir>forward|backward)(?:_(?P<slot>.*)|$)")
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
    # the rows as entries, in file (= target dump) order: (target entry, bench entry or None
    # when msprobe found no bench twin), for the same comparison our dump pairs go through
    pairs: list[tuple[Entry, Entry | None]] = field(default_factory=list)
    code_lines: dict[str, str] = field(default_factory=dict)   # api -> user code line (stack column)
    modules: dict[str, str] = field(default_factory=dict)      # api -> module path (mix: module rows)

    @property
    def same_device(self) -> bool:
        """The rows compare a run with another launch of the same job (a rerun), not with the
        baseline: every row is matched, a matmul-class API (linear, matmul, bmm ...) returned
        bit-identical outputs on both sides before anything differed -- such kernels never agree
        to the last bit across devices -- and the first API whose output differs got bit-identical
        inputs and returns finite values off in the last digits only (the signature of a
        launch-dependent accumulation order). A rerun comparison is then told by its rows,
        whatever folder the file was found in; anything else (a dtype, a scalar argument, a NaN on
        one side, a large jump, an unmatched API) reads as a comparison with the baseline."""
        matmul_equal = False
        for a, b in self.pairs:
            if b is None:
                return False
            outs = [(x, y) for x, y in zip(a.outputs, b.outputs) if x.kind == "tensor" and y.kind == "tensor"]
            if not outs:
                continue
            if all(_same_leaf(x, y) for x, y in outs):
                if a.name.direction == "forward" and api_family(a.name.base) == "matmul":
                    matmul_equal = True
                continue
            if not matmul_equal:
                return False
            ins = [(x, y) for x, y in zip(a.inputs + a.params, b.inputs + b.params)]
            if len(a.inputs) != len(b.inputs) or not all(_same_leaf(x, y) for x, y in ins):
                return False
            return all(_last_digits(x, y) for x, y in outs)
        return matmul_equal

    def first_flagged(self) -> ApiRows | None:
        for label in ("error", "warning"):
            for a in self.apis:
                if a.label == label and not a.unmatched:
                    return a
        return None


def _row_api(name: str) -> str | None:
    return _row_slot(name)[0]


def _row_slot(name: str) -> tuple[str | None, str]:
    """(API entry name, slot as in our entries: input.0, input.eps, parameters.weight, output.0)."""
    m = _ROW_API.match(name)
    if m:
        return m["api"], m["slot"]
    m = _ROW_GRAD.match(name)
    if m:  # Module.head.Linear.parameters_grad.0.weight: one gradient per parameter
        return m["api"], f"output.{m['param']}"
    m = _LEGACY_API.match(name)
    if m:  # Functional_linear_0_forward_input.0 -> Functional.linear.0.forward
        base = m["base"].replace("_", ".", 1)
        return f"{base}.{m['index']}.{m['dir']}", (m["slot"] or "output")
    return None, ""


_MISSING = ("", "N/A", "NONE", "UNSUPPORTED", "-", "NAN%")


def _cell_num(text: str | None) -> float | int | None:
    """A statistic cell: numbers (also 'Nan', ' inf', '-inf'), True/False of bool tensors as 1/0,
    None for N/A / None / unsupported / text."""
    if text is None:
        return None
    t = str(text).strip()
    if t.upper() in _MISSING:
        return None
    if t in ("True", "False"):
        return int(t == "True")
    try:
        v = float(t)
    except ValueError:
        return None
    return int(v) if v.is_integer() and "." not in t and "e" not in t.lower() and abs(v) < 2 ** 53 else v


def _shape(text: str | None) -> tuple | None:
    t = (text or "").strip()
    if not (t.startswith("[") and t.endswith("]")):
        return None
    parts = [p.strip() for p in t[1:-1].split(",") if p.strip()]
    try:
        return tuple(int(p) for p in parts)
    except ValueError:
        return tuple(parts)


def _bool(text: str | None) -> bool | None:
    t = (text or "").strip()
    return True if t == "True" else False if t == "False" else None


def _leaf(slot: str, get, side: str, mode: str) -> TensorInfo:
    """One side ('NPU' or 'Bench') of one CSV row as the leaf our comparison reads."""
    dtype = (get(f"{side} Dtype") or get(f"{side} Tensor Dtype") or "").strip()
    if dtype.upper() in ("N/A", "NONE", ""):
        return TensorInfo(slot, "none")
    low = "bench" if side == "Bench" else "npu"
    stats = [_cell_num(get(f"{side} {k}")) for k in ("max", "min", "mean", "l2norm")]
    if dtype.startswith("<class"):
        raw = (get(f"{side} max") or "").strip()
        v = stats[0]
        return TensorInfo(slot, "scalar", dtype=dtype, value=repr(float(v)) if v is not None else raw)
    md5 = (get(f"{side} MD5") or get(f"{side.upper()} MD5") or "").strip() if mode == "md5" else ""
    t = TensorInfo(slot, "tensor", dtype, _shape(get(f"{side} Tensor Shape")), *stats,
                   md5=md5 if md5 and md5.upper() not in ("N/A", "NONE") else None,
                   requires_grad=_bool(get(f"{side} Requires_grad")))
    t.bad = t._classify()
    del low
    return t


def _code_line(text: str | None) -> str | None:
    t = (text or "").strip()
    if not t.startswith("["):
        return None
    import ast
    try:
        frames = ast.literal_eval(t)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    return user_frame(frames) if isinstance(frames, list) else None


def _wraps(module_entry: str, api_base: str) -> bool:
    """The module is a leaf wrapper of this API (Linear around linear, LayerNorm around
    layer_norm, Embedding around embedding, GELU around gelu)."""
    cls = parse_entry_name(module_entry).base.rsplit(".", 1)[-1].lower()
    api = api_base.rsplit(".", 1)[-1].lower().replace("_", "")
    return bool(api) and (api == cls or (len(api) >= 4 and (api in cls or cls in api)))


def _infer_modules(order: list[str]) -> dict[str, str]:
    """Module path of each API from the order of a mix-level result: a module's forward (or
    backward) entry is written when it completes, so an API sits in the next module to complete
    when that module is a leaf wrapping this kind of API (Linear around linear), else in the
    common part of the module before and after it."""
    out: dict[str, str] = {}
    for direction in ("forward", "backward"):
        seq = [(n, parse_entry_name(n)) for n in order]
        seq = [(n, p) for n, p in seq if p.direction == direction]
        modules = [i for i, (_, p) in enumerate(seq) if p.is_module]
        if not modules:
            continue
        for i, (name, p) in enumerate(seq):
            if p.is_module:
                continue
            nxt = next((j for j in modules if j > i), None)
            prv = next((j for j in reversed(modules) if j < i), None)
            nxt_path = module_path_of(seq[nxt][0]) if nxt is not None else None
            prv_path = module_path_of(seq[prv][0]) if prv is not None else None
            if nxt_path and _wraps(seq[nxt][0], p.base):
                out[name] = nxt_path
                continue
            if nxt_path and prv_path:
                common = []
                for x, y in zip(nxt_path.split("."), prv_path.split(".")):
                    if x != y:
                        break
                    common.append(x)
                if common:
                    out[name] = ".".join(common)
                    continue
            if nxt_path:
                out[name] = nxt_path
    return out


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


def _same_leaf(x: TensorInfo, y: TensorInfo) -> bool:
    if x.kind != y.kind:
        return False
    if x.kind != "tensor":
        return x.value == y.value
    return (x.dtype == y.dtype and x.shape == y.shape and x.max == y.max and x.min == y.min
            and x.mean == y.mean and x.norm == y.norm and x.md5 == y.md5
            and (x.max is not None or x.md5 is not None) and x.abnormal() is None)


_LAST_DIGITS = 1e-3


def _last_digits(x: TensorInfo, y: TensorInfo) -> bool:
    """Both finite and equal within a relative 1e-3 (md5-only rows: only the checksum is known)."""
    if x.abnormal() is not None or y.abnormal() is not None or x.dtype != y.dtype or x.shape != y.shape:
        return False
    vals = [(x.max, y.max), (x.min, y.min), (x.mean, y.mean), (x.norm, y.norm)]
    known = [(u, v) for u, v in vals if isinstance(u, (int, float)) and isinstance(v, (int, float))]
    if not known:
        return x.md5 is not None and y.md5 is not None
    scale = max(abs(float(v)) for _, v in known) or 1.0
    return all(abs(float(u) - float(v)) <= _LAST_DIGITS * scale for u, v in known)


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
    entries: dict[str, tuple[Entry, Entry, list[bool]]] = {}
    code: dict[str, str] = {}
    short_rows = 0
    for n, row in enumerate(rows[1:], start=2):
        if not any(row):
            continue
        if len(row) < len(header):
            short_rows += 1
            row = row + [""] * (len(header) - len(row))
        get = lambda c: row[col[c]] if c in col else None  # noqa: E731
        name = get("NPU Name") or get("Bench Name") or ""
        api, slot = _row_slot(name)
        if api is None:
            continue
        rec = apis.get(api)
        if rec is None:
            rec = apis[api] = ApiRows(api, n)
            parsed = parse_entry_name(api)
            entries[api] = (Entry(parsed, len(entries)), Entry(parsed, len(entries)), [False])
            line = _code_line(get("NPU_Stack_Info"))
            if line:
                code[api] = line
        ea, eb, matched = entries[api]
        bench_missing = (get("Bench Name") or "").strip().upper() == "N/A"
        matched[0] = matched[0] or not bench_missing
        part = ("params" if slot.startswith("parameters") else
                "outputs" if slot.startswith("output") else "inputs")
        getattr(ea, part).append(_leaf(slot, get, "NPU", mode))
        if not bench_missing:
            getattr(eb, part).append(_leaf(slot, get, "Bench", mode))
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
    pairs = [(ea, eb if matched[0] else None) for ea, eb, matched in entries.values()]
    return CompareResult(path, mode, max(len(rows) - 1, 0), list(apis.values()),
                         int(m.group(1)) if m else None, step, pairs, code, _infer_modules(list(entries)))
