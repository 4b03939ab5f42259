"""Issue 17: the .xlsx compare-result reader on workbooks written here with openpyxl from the
shared CSV compare results (numbers as numeric cells, like msprobe's pandas export): the same
CompareResult as the CSV, for the statistics, md5, tensor and unmatched-API layouts."""
from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest

from precdx.collectors.msprobe import compare_result
from precdx.errors import Warnings
from tests.collectors.msprobe.test_split_equivalence import norm

openpyxl = pytest.importorskip("openpyxl")

CSVS = ["09_compare_statistics_bf16/compare_result_20261129135411.csv",
        "11_compare_md5/compare_result_md5_eps_vs_base.csv",
        "12_compare_tensor/compare_result_tensor_nan_vs_base.csv",
        "13_nan_overflow/compare_result_nan_vs_base.csv",
        "14_compare_unmatched_api/compare_result_extra_vs_base.csv"]


def _cell(text: str):
    """A number as a numeric cell when the cell can hold it (not NaN/Inf, no leading zeros)."""
    if text == "":
        return None
    try:
        i = int(text)
        return i if str(i) == text else text
    except ValueError:
        pass
    try:
        v = float(text)
    except ValueError:
        return text
    return v if math.isfinite(v) else text


def _rounded(x):
    """Excel keeps 15 significant digits and reads 1.0 back as 1: compare numbers by value, to
    12 digits."""
    if isinstance(x, int) and not isinstance(x, bool):
        return ("float", f"{float(x):.12g}")
    if isinstance(x, str):   # numbers kept as text (scalar arguments) went through a numeric cell
        try:
            v = float(x)
        except ValueError:
            return x
        return ("float", f"{v:.12g}") if math.isfinite(v) else x
    if isinstance(x, tuple) and len(x) == 2 and x[0] == "float":
        v = float(x[1])
        return ("float", x[1] if not math.isfinite(v) else f"{v:.12g}")
    if isinstance(x, (list, tuple)):
        return type(x)(_rounded(v) for v in x)
    return x


def _to_xlsx(src: Path, dest: Path) -> Path:
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "compare_result"
    with src.open(newline="", encoding="utf-8-sig") as fh:
        for i, row in enumerate(csv.reader(fh)):
            ws.append(row if i == 0 else [_cell(c) for c in row])
    wb.save(dest)
    return dest


def _first_difference(a, b, path: str = "") -> str:
    if type(a) is not type(b) or not isinstance(a, (list, tuple)) or len(a) != len(b):
        return f"{path}: {str(a)[:200]} != {str(b)[:200]}"
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return _first_difference(x, y, f"{path}/{x[0] if isinstance(x, tuple) and x and isinstance(x[0], str) else i}")
    return path


@pytest.mark.parametrize("rel", CSVS)
def test_xlsx_reads_like_the_csv(samples: Path, tmp_path: Path, rel: str) -> None:
    src = samples / rel
    if not src.is_file():
        pytest.skip(f"{rel} not in the shared samples")
    xlsx = _to_xlsx(src, tmp_path / (src.stem + ".xlsx"))
    w_csv, w_xlsx = Warnings(), Warnings()
    from_csv = compare_result.read_compare_result(src, w_csv)
    from_xlsx = compare_result.read_compare_result(xlsx, w_xlsx)
    assert from_csv is not None and from_xlsx is not None
    assert str(from_xlsx.path) == str(xlsx)
    from_xlsx.path = from_csv.path
    a, b = _rounded(norm(from_csv)), _rounded(norm(from_xlsx))
    assert a == b, f"{rel}: {_first_difference(a, b)}"
    assert [m["message"] for m in w_csv] == [m["message"] for m in w_xlsx]
    assert from_xlsx.n_rows > 0


def test_damaged_workbook_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "compare_result_1.xlsx"
    bad.write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(Exception) as exc:
        compare_result.read_compare_result(bad, Warnings())
    assert "xlsx" in str(exc.value) and str(bad) in getattr(exc.value, "path", str(bad))
