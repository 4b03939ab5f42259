"""msprobe config_check outputs: the comparison workbook (result.xlsx: summary, env, pip,
hyperparameters sheets) and the checkpoint similarity json (ckpt_similarity.json)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from precdx.collectors.msprobe.jsonstream import load_small_json
from precdx.errors import PrecdxError, Warnings

# Checkpoints written from the same weights have cosine 1.0; below this they differ.
CKPT_COS_MIN = 0.99
_LEVELS = ("pass", "warning", "error")


@dataclass
class CheckLine:
    """One config_check finding."""

    section: str
    item: str
    level: str
    bench_value: str | None = None
    cmp_value: str | None = None


def _text(v) -> str:
    return "" if v is None else str(v).strip()


def read_result_workbook(path: Path, warnings: Warnings) -> list[CheckLine]:
    """Lines of result.xlsx: every summary row, and the non-pass rows of the detail sheets."""
    try:
        import openpyxl  # optional dependency, only for config_check workbooks
    except ImportError:
        warnings.add("cannot read config_check result.xlsx: the openpyxl package is not installed "
                      "(pip install openpyxl)", path=str(path))
        return []
    try:
        wb = openpyxl.load_workbook(path, read_only=True, data_only=True)
    except Exception as exc:
        raise PrecdxError(f"not a readable .xlsx workbook ({type(exc).__name__})", path=str(path)) from None
    out: list[CheckLine] = []
    try:
        for ws in wb.worksheets:
            rows = [[_text(v) for v in r] for r in ws.iter_rows(values_only=True)]
            if not rows:
                continue
            head = rows[0]
            col = {h: i for i, h in enumerate(head)}
            sheet = ws.title.strip().lower()
            for r in rows[1:]:
                get = lambda c: r[col[c]] if c in col and col[c] < len(r) else ""  # noqa: E731
                if sheet == "summary":
                    level = get("pass_check").lower()
                    if level in _LEVELS and get("filename"):
                        out.append(CheckLine("summary", get("filename"), level))
                    continue
                level = (get("level") or get("check_result")).lower()
                if level in ("true",):
                    level = "pass"
                elif level in ("false",):
                    level = "warning"
                if level not in _LEVELS or level == "pass":
                    continue
                if sheet == "hyperparameters":
                    item = get("bench_para")
                    if item.lower().startswith("only in"):
                        item = get("cmp_para")
                    out.append(CheckLine(sheet, item, level, get("bench_value"), get("cmp_value")))
                elif sheet == "env":
                    out.append(CheckLine(sheet, get("bench_env_name"), level, get("bench_value"), get("cmp_value")))
                elif sheet == "pip":
                    out.append(CheckLine(sheet, get("package"), level, get("bench version"), get("cmp version")))
                elif sheet == "random":
                    out.append(CheckLine(sheet, f"{get('op')}@rank{get('rank')}", level,
                                         get("bench_count"), get("cmp_count")))
    finally:
        wb.close()
    return out


def read_ckpt_similarity(path: Path) -> list[CheckLine]:
    """Parameters whose checkpoints differ (cosine below CKPT_COS_MIN), plus one overall line."""
    data = load_small_json(path, what="checkpoint similarity json")
    if not isinstance(data, dict):
        raise PrecdxError("expected {parameter: {l2, cos, numel, shape}}", path=str(path))
    out: list[CheckLine] = []
    for name, rec in data.items():
        if not isinstance(rec, dict):
            continue
        cos = rec.get("cos")
        if isinstance(cos, (int, float)) and (not math.isfinite(cos) or cos < CKPT_COS_MIN):
            out.append(CheckLine("checkpoint", str(name), "error", f"cos={cos}", f"l2={rec.get('l2')}"))
    out.append(CheckLine("checkpoint", "all_parameters", "error" if out else "pass",
                         f"{len(data)} parameters", f"{len(out)} differ"))
    return out
