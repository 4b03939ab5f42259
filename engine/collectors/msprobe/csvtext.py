"""Reading msprobe's CSV outputs (compare results, monitor tables, API checks) safely: long cells
(stack traces in NPU_Stack_Info) are allowed up to FIELD_LIMIT, stray carriage returns inside a
line end a record instead of failing, and whatever the csv module still rejects becomes a warning
naming the file and line (the rows read before it are kept)."""
from __future__ import annotations

import csv
import io
import re
from pathlib import Path
from typing import Iterator

from precdx.errors import PrecdxError, Warnings

# The csv module's default limit (128 KiB) is below what a deep NPU_Stack_Info cell can take.
FIELD_LIMIT = 16 << 20
if csv.field_size_limit() < FIELD_LIMIT:
    csv.field_size_limit(FIELD_LIMIT)


def csv_text(path: Path, *, what: str, encoding: str = "utf-8-sig") -> str:
    """The file's text; PrecdxError for binary data."""
    raw = path.read_bytes()
    if b"\x00" in raw[:4096]:
        raise PrecdxError(f"binary data where {what} was expected", path=str(path))
    return raw.decode(encoding, errors="replace")


_BARE_CR = re.compile(r"\r(?!\n)")


def _stray_cr(text: str, path: Path, warnings: Warnings | None, what: str) -> None:
    """A carriage return alone (not before a newline) outside quotes ends a CSV record: say where,
    since the row it cuts in two is read only in part. (Rare: only then is the text parsed twice.)"""
    if warnings is None or _BARE_CR.search(text) is None:
        return
    reader = csv.reader(io.StringIO(text))   # lines split at \n only: an unquoted \r is an error
    try:
        for _ in reader:
            pass
    except csv.Error as exc:
        if "new-line" in str(exc):
            warnings.add(f"{what} has a stray carriage return inside line {reader.line_num}: the row "
                         "there is split in two and read only in part", path=str(path), line=reader.line_num)


def _reader_rows(reader, path: Path, warnings: Warnings | None) -> Iterator:
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            # DictReader.line_num lags behind on a failed row: ask the csv reader inside it
            line = getattr(getattr(reader, "reader", reader), "line_num", 0) or None
            message = f"CSV cannot be read past line {line or '?'} ({exc}); rows before it are used"
            if warnings is None:
                raise PrecdxError(message, path=str(path), line=line) from None
            warnings.add(message, path=str(path), line=line)
            return
        yield row


def csv_rows(text: str, path: Path, warnings: Warnings | None, *, what: str = "the CSV file") -> list[list[str]]:
    """Rows of `text` (split like a file opened with newline=""); a csv.Error stops the reading
    with a warning (or a PrecdxError when no warnings are collected)."""
    _stray_cr(text, path, warnings, what)
    return list(_reader_rows(csv.reader(io.StringIO(text, newline="")), path, warnings))


def csv_dicts(text: str, path: Path, warnings: Warnings | None,
              *, what: str = "the CSV file") -> tuple[list[str], list[dict]]:
    """(header, rows as dicts) of `text`, with the same safety as csv_rows."""
    _stray_cr(text, path, warnings, what)
    reader = csv.DictReader(io.StringIO(text, newline=""))
    try:
        fields = list(reader.fieldnames or [])
    except csv.Error as exc:
        raise PrecdxError(f"CSV header cannot be read ({exc})", path=str(path), line=1) from None
    return fields, list(_reader_rows(reader, path, warnings))
