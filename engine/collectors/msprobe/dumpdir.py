"""A dump directory (`step<N>/rank<R>|proc<pid>/` with dump.json, stack.json, construct.json):
finding its step and rank, reading dump.json's header cheaply, and streaming its entries."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from precdx.collectors.msprobe.entries import Entry, EntryIssues, build_entry
from precdx.collectors.msprobe.jsonstream import (
    NestingTooDeep, is_int_overflow, json_error_message, stream_kvitems)
from precdx.errors import PrecdxError

_STEP = re.compile(r"^step(\d+)$")
_RANK = re.compile(r"^(?:rank|proc)_?(\d+)$")
_HEADER_KEY = re.compile(rb'"(task|level|framework|dump_data_dir)"\s*:\s*("([^"\\]*)"|null)')
_HUGE_NUMBER = re.compile(r"Unexpected symbol '-?\d")   # the pure-Python ijson backend's words
_HEAD = 64 * 1024
_TAIL = 4 * 1024


@dataclass(frozen=True)
class DumpDir:
    """Where one dump.json lives and which step/rank it is."""

    path: Path                  # the dump.json file
    step: int
    rank: int
    rank_from_pid: bool = False

    @property
    def folder(self) -> Path:
        return self.path.parent

    @property
    def stack(self) -> Path | None:
        p = self.folder / "stack.json"
        return p if p.is_file() else None

    @property
    def construct(self) -> Path | None:
        p = self.folder / "construct.json"
        return p if p.is_file() else None


def locate(dump_json: Path) -> DumpDir:
    """Step and rank from the folder names (rank<R>/proc<pid> inside step<N>); a dump outside
    that layout counts as step 0, rank 0."""
    rank_dir, step_dir = dump_json.parent, dump_json.parent.parent
    step = rank = 0
    from_pid = False
    m = _RANK.match(rank_dir.name)
    if m:
        from_pid = rank_dir.name.startswith("proc")
        rank = 0 if from_pid else int(m.group(1))
    ms = _STEP.match(step_dir.name) or _STEP.match(rank_dir.name)
    if ms:
        step = int(ms.group(1))
    return DumpDir(dump_json, step, rank, from_pid)


@dataclass
class DumpHeader:
    """dump.json's top-level keys other than `data`."""

    task: str = "unknown"
    level: str = "unknown"
    framework: str = "unknown"
    tensor_dir: bool = False


def read_header(path: Path) -> DumpHeader:
    """Header keys from the first and last bytes (the key order varies between versions)."""
    try:
        with path.open("rb") as fh:
            head = fh.read(_HEAD)
            size = fh.seek(0, 2)
            tail = b""
            if size > _HEAD:
                fh.seek(max(size - _TAIL, _HEAD))
                tail = fh.read()
    except OSError as exc:
        raise PrecdxError(f"cannot read dump.json: {exc.strerror or exc}", path=str(path)) from None
    header = DumpHeader()
    for blob in (head, tail):
        # only keys at the top level: msprobe writes them with one-space indent or none
        for m in _HEADER_KEY.finditer(blob):
            key, value = m.group(1).decode(), m.group(3)
            if key == "dump_data_dir":
                header.tensor_dir = value is not None and value != b""
            elif value is not None and getattr(header, key) == "unknown":
                setattr(header, key, value.decode("utf-8", "replace"))
    if header.framework == "unknown":
        if b"torch." in head:
            header.framework = "pytorch"
        elif b"mindspore" in head.lower() or b'"Float32"' in head:
            header.framework = "mindspore"
    return header


class DumpReadError(Exception):
    """dump.json could not be read to its end; `entries_read` were delivered before that."""

    def __init__(self, message: str, entries_read: int) -> None:
        super().__init__(message)
        self.entries_read = entries_read


def iter_entries(path: Path, issues: EntryIssues | None = None) -> Iterator[Entry]:
    """Entries of dump.json in file (= execution) order, streamed. Raises DumpReadError when the
    file is damaged part-way (after yielding what came before). Integers beyond 64 bits stop the
    fast reader: the file is then read again with the pure-Python one (noted in `issues`), the
    entries already delivered skipped."""
    count = 0
    big_ints = False
    first_error: Exception | None = None
    while True:
        try:
            with path.open("rb") as fh:
                for i, (name, body) in enumerate(stream_kvitems(fh, "data", big_ints=big_ints)):
                    if i < count:
                        continue
                    yield build_entry(name, body, count, issues)
                    count += 1
            return
        except OSError as exc:
            raise DumpReadError(f"cannot read: {exc.strerror or exc}", count) from None
        except NestingTooDeep as exc:
            raise DumpReadError(f"the JSON is {exc}; reading stopped there", count) from None
        except Exception as exc:  # ijson raises several classes (IncompleteJSONError, JSONError, ...)
            if not (type(exc).__module__.startswith("ijson") or "JSON" in type(exc).__name__
                    or isinstance(exc, (ValueError, UnicodeDecodeError))):
                raise
            if not big_ints and is_int_overflow(exc):
                big_ints, first_error = True, exc
                if issues is not None:
                    issues.add("bigint", f"entry {count}")
                continue
            if first_error is not None and _HUGE_NUMBER.match(str(exc)):
                exc = first_error   # a number of thousands of digits: say what yajl said
            raise DumpReadError(json_error_message(exc), count) from None
