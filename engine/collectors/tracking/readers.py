"""Readers of the scalar histories tracking tools keep, each giving a `Scalars` table: per scalar
name, the (key, value) pairs in the order they were written, where the key is the step
(TensorBoard, MLflow, `.wandb`) or the row number (CSV, JSON lines; the step is then a column).

- TensorBoard event files: tensorboard's own record reader and Event proto (no hand parsing);
  old-style `simple_value` and new-style tensor scalars alike.
- MLflow file stores: `mlruns/<experiment>/<run>/metrics/<name>`, one `timestamp value step` line
  per logged value (a name holding `/` is a sub-folder).
- W&B: `wandb-history.jsonl` (one JSON object per log call) and CSV exports of the web UI
  (`Step`, `<run> - <metric>`, `<run> - <metric>__MIN`, ...); binary `.wandb` run files through
  the wandb SDK when it is installed (`pip install 'precdx[wandb]'`).
- Plain CSV / JSON lines with a step column and metric columns.

Every reader stores only the scalar names a caller asks for (`keep`), as typed arrays, so a long
run costs 16 bytes a kept point; names merely seen are remembered (for framework detection).
Problems are collected as messages for the caller to turn into warnings.
"""
from __future__ import annotations

import csv
import json
import math
import re
import struct
import zlib
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from precdx.collectors.logs.model import parse_num
from precdx.compression import open_binary, plain_name

Keep = Callable[[str], bool]
MAX_BAD_LINES_REPORTED = 3


@dataclass
class Scalars:
    tool: str                                  # tensorboard | mlflow | wandb | csv | jsonl
    source: str                                # the path named in facts and warnings
    by_row: bool = False                       # keys are row numbers (tables), not steps
    cols: dict[str, tuple[array, array]] = field(default_factory=dict)
    present: set[str] = field(default_factory=set)
    problems: list[tuple[str, str, int | None]] = field(default_factory=list)   # (path, message, line)
    files: list[str] = field(default_factory=list)

    def note(self, path: Path | str, message: str, line: int | None = None) -> None:
        self.problems.append((str(path), message, line))

    def add(self, name: str, key: int, value: float) -> None:
        col = self.cols.get(name)
        if col is None:
            col = self.cols[name] = (array("q"), array("d"))
        col[0].append(key)
        col[1].append(value)

    def count(self, name: str) -> int:
        col = self.cols.get(name)
        return len(col[0]) if col else 0


def _sane_int(x: float | int | None) -> int | None:
    if x is None:
        return None
    try:
        if isinstance(x, float) and not math.isfinite(x):
            return None
        v = int(x)
    except (ValueError, OverflowError):
        return None
    return v if abs(v) <= 2 ** 53 else None


# ------------------------------------------------------------------ TensorBoard
_TB_NAME = re.compile(r"events\.out\.tfevents\.(\d+)")


def tb_file_order(path: Path) -> tuple:
    """Event files of one folder in writing order: by the creation time in their name."""
    m = _TB_NAME.search(path.name)
    return (int(m.group(1)) if m else 0, path.name)


def read_tensorboard(files: list[Path], keep: Keep, source: str) -> Scalars:
    """Scalars of the event files of one TensorBoard run folder, in writing order."""
    try:
        from tensorboard.backend.event_processing.event_file_loader import RawEventFileLoader
        from tensorboard.compat.proto import event_pb2
    except ImportError:
        out = Scalars("tensorboard", source)
        out.note(source, "TensorBoard event files need the tensorboard package to be read "
                            "(pip install 'precdx[tracking]')")
        return out
    _quiet_tensorboard()
    out = Scalars("tensorboard", source, files=[str(f) for f in files])
    for path in sorted(files, key=tb_file_order):
        try:
            size = path.stat().st_size
        except OSError as exc:
            out.note(path, f"cannot read: {exc.strerror or exc}")
            continue
        used = events = 0
        try:
            for raw in RawEventFileLoader(str(path)).Load():
                used += len(raw) + 16  # length, its CRC, the payload and its CRC
                try:
                    event = event_pb2.Event.FromString(raw)
                except Exception:  # noqa: BLE001 - protobuf DecodeError: a damaged record
                    out.note(path, "a record is not a TensorBoard event; skipped")
                    continue
                events += 1
                if not event.HasField("summary"):
                    continue
                step = event.step
                for value in event.summary.value:
                    tag = value.tag
                    v = _scalar(value)
                    if v is None:
                        continue
                    out.present.add(tag)
                    if keep(tag):
                        out.add(tag, step, v)
        except OSError as exc:
            out.note(path, f"cannot read: {exc.strerror or exc}")
            continue
        if events == 0:
            out.note(path, f"no TensorBoard event could be read (not an event file, or damaged at "
                                "the start)")
        elif used < size:
            out.note(path, f"the last {size - used} bytes are not a complete event record (file "
                                "cut off or damaged); read up to there")
    return out


def _scalar(value) -> float | None:
    """The float of a scalar summary value (old `simple_value` or a 0-d/size-1 tensor)."""
    kind = value.WhichOneof("value")
    if kind == "simple_value":
        return float(value.simple_value)
    if kind != "tensor":
        return None
    plugin = value.metadata.plugin_data.plugin_name
    if plugin and plugin != "scalars":
        return None
    t = value.tensor
    for vals in (t.float_val, t.double_val, t.half_val, t.int_val, t.int64_val):
        if len(vals) == 1:
            return float(vals[0])
    if t.tensor_content:
        try:
            from tensorboard.util import tensor_util
            arr = tensor_util.make_ndarray(t)
        except Exception:  # noqa: BLE001 - an odd dtype is not a curve
            return None
        if arr.size == 1 and arr.dtype.kind in "fiu":
            return float(arr.reshape(-1)[0])
    return None


def _quiet_tensorboard() -> None:
    """tensorboard logs through absl/logging at WARNING for things we report ourselves."""
    import logging
    logging.getLogger("tensorboard").setLevel(logging.ERROR)


# ------------------------------------------------------------------ MLflow
_MLFLOW_LINE = re.compile(rb"^\s*(-?\d+)\s+(\S+)(?:\s+(-?\d+))?\s*$")


def mlflow_run_dir(path: Path) -> Path | None:
    """The MLflow run folder of a metric file (`<run>/metrics/<name...>`, `<run>/meta.yaml`)."""
    for parent in path.parents:
        if parent.name == "metrics" and (parent.parent / "meta.yaml").is_file():
            return parent.parent
    return None


def read_mlflow(run_dir: Path, metric_files: Iterable[Path], keep: Keep) -> Scalars:
    metrics = run_dir / "metrics"
    out = Scalars("mlflow", str(run_dir))
    for path in sorted(metric_files):
        try:
            name = path.relative_to(metrics).as_posix()
        except ValueError:
            continue
        out.present.add(name)
        out.files.append(str(path))
        if not keep(name):
            continue
        bad = 0
        try:
            with open_binary(path) as fh:
                for lineno, line in enumerate(fh, 1):
                    if not line.strip():
                        continue
                    m = _MLFLOW_LINE.match(line)
                    value = parse_num(m.group(2).decode("ascii", "replace")) if m else None
                    step = _sane_int(int(m.group(3))) if m and m.group(3) is not None else 0
                    if m is None or value is None or step is None:
                        bad += 1
                        if bad <= MAX_BAD_LINES_REPORTED:
                            out.note(path, "not an MLflow metric line ('timestamp value step'); skipped",
                                     lineno)
                        continue
                    out.add(name, step, value)
        except OSError as exc:
            out.note(path, f"cannot read: {exc.strerror or exc}")
        if bad > MAX_BAD_LINES_REPORTED:
            out.note(path, f"{bad} malformed lines in all were skipped")
    return out


# ------------------------------------------------------------------ tables: CSV and JSON lines
_WANDB_COL = re.compile(r"^(?P<run>.+?) - (?P<metric>.+)$")


def read_csv(path: Path, keep: Keep, prefer: Iterable[str] = ()) -> Scalars:
    """A CSV with a header row. W&B UI exports (`<run> - <metric>` columns, `__MIN`/`__MAX`
    companions) are reduced to one run's metric names: the run whose column a `prefer` name
    (a user mapping) names, else the first run, with a note naming the others."""
    out = Scalars("csv", str(path), by_row=True, files=[str(path)])
    try:
        fh = open_binary(path)  # .csv.gz / .csv.zst too
    except OSError as exc:
        out.note(path, f"cannot read: {exc.strerror or exc}")
        return out
    with fh:
        delimiter = "\t" if plain_name(path).lower().endswith(".tsv") else ","
        reader = csv.reader((line.decode("utf-8", errors="replace") for line in fh), delimiter=delimiter)
        try:
            header = next(reader)
        except (StopIteration, csv.Error, OSError):
            out.note(path, "no header row")
            return out
        header = [h.strip().lstrip("\ufeff") for h in header]
        names, wandb_runs = _csv_names(header, set(prefer))
        if len(wandb_runs) > 1:
            out.tool = "wandb"
            out.note(path, f"the export holds {len(wandb_runs)} W&B runs ({', '.join(wandb_runs)}); "
                                f"using '{wandb_runs[0]}' (name another run's column in a precdx_tracking_tags "
                                "file to use it)")
        elif wandb_runs:
            out.tool = "wandb"
        out.present.update(n for n in names if n)
        wanted = [(i, n) for i, n in enumerate(names) if n and keep(n)]
        bad = 0
        try:
            for row_no, row in enumerate(reader, 1):
                if not row:
                    continue
                for i, name in wanted:
                    if i >= len(row):
                        continue
                    cell = row[i].strip()
                    if not cell:
                        continue
                    v = parse_num(cell)
                    if v is None:
                        bad += 1
                        continue
                    out.add(name, row_no, v)
        except (csv.Error, OSError) as exc:
            out.note(path, f"CSV damaged ({exc}); read up to there")
        if bad:
            out.note(path, f"{bad} non-numeric cell(s) in metric columns were skipped")
    return out


def _csv_names(header: list[str], prefer: set[str]) -> tuple[list[str | None], list[str]]:
    """Column -> metric name (None for columns to drop) and the W&B run names found."""
    parsed = [_WANDB_COL.match(h) for h in header]
    runs: list[str] = []
    for m in parsed:
        if m and m.group("run") not in runs and not m.group("metric").endswith(("__MIN", "__MAX")):
            runs.append(m.group("run"))
    # Only a W&B export when most metric columns carry the "<run> - " prefix.
    if not runs or sum(1 for m in parsed if m) < max(1, (len(header) - 1) // 2):
        return list(header), []
    chosen = runs[0]
    for h in header:
        if h in prefer:
            m = _WANDB_COL.match(h)
            if m:
                chosen = m.group("run")
                break
    if chosen in runs:
        runs.remove(chosen)
    runs.insert(0, chosen)
    names: list[str | None] = []
    for h, m in zip(header, parsed):
        if m is None:
            names.append(h)
        elif m.group("run") == chosen and not m.group("metric").endswith(("__MIN", "__MAX")):
            names.append(m.group("metric"))
        else:
            names.append(None)
    return names, runs


def read_jsonl(path: Path, keep: Keep, tool: str = "jsonl") -> Scalars:
    """JSON lines: one object per line; numbers (and "NaN"/"Infinity" strings) are values;
    nested objects are flattened with '/' (W&B's own separator)."""
    out = Scalars(tool, str(path), by_row=True, files=[str(path)])
    bad = 0
    try:
        with open_binary(path) as fh:
            for row_no, line in enumerate(fh, 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    obj = json.loads(line)
                except (ValueError, RecursionError):
                    obj = None
                if not isinstance(obj, dict):
                    bad += 1
                    if bad <= MAX_BAD_LINES_REPORTED:
                        out.note(path, "not a JSON object; skipped", row_no)
                    continue
                for name, value in _flat(obj):
                    out.present.add(name)
                    if keep(name):
                        out.add(name, row_no, value)
    except OSError as exc:
        out.note(path, f"cannot read: {exc.strerror or exc}")
    if bad > MAX_BAD_LINES_REPORTED:
        out.note(path, f"{bad} lines in all were not JSON objects")
    return out


def _flat(obj: dict, prefix: str = "", depth: int = 0) -> Iterable[tuple[str, float]]:
    for k, v in obj.items():
        name = f"{prefix}{k}"
        if isinstance(v, bool):
            continue
        if isinstance(v, (int, float)):
            try:
                yield name, float(v)
            except OverflowError:
                yield name, math.inf if v > 0 else -math.inf
        elif isinstance(v, str) and len(v) < 40:
            num = _number_text(v)
            if num is not None:
                yield name, num
        elif isinstance(v, dict) and depth < 3 and not v.get("_type"):  # W&B media objects carry _type
            yield from _flat(v, name + "/", depth + 1)


def _number_text(text: str) -> float | None:
    """A number written as a string ("NaN", "Infinity", "1e-3"), as W&B and JSON writers do for
    values JSON cannot hold; any other string is not a value."""
    try:
        return float(text.strip())
    except ValueError:
        return None


# ------------------------------------------------------------------ W&B binary run files
# A `.wandb` file is a LevelDB-style log: a 7-byte file header (":W&B", magic 0xBEE1, version 0),
# then 32 KiB blocks of records, each `crc32 (4) | length (2) | type (1) | data`, the CRC seeded
# with the type byte; type FULL holds one message, FIRST/MIDDLE/LAST split a long one across
# blocks, and a block tail shorter than a record header is zero padding. Each message is a
# `wandb_internal_pb2.Record` protobuf, decoded with the wandb SDK's own generated classes.
WANDB_HEADER = struct.Struct("<4sHB")
WANDB_RECORD = struct.Struct("<IHB")
WANDB_BLOCK = 32768
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4


def _wandb_messages(fh, out: "Scalars", path: Path) -> Iterable[bytes]:
    head = fh.read(WANDB_HEADER.size)
    if len(head) < WANDB_HEADER.size or WANDB_HEADER.unpack(head)[0] != b":W&B":
        out.note(path, "not a W&B run file (no :W&B header)")
        return
    seeds = {t: zlib.crc32(bytes([t])) for t in (_FULL, _FIRST, _MIDDLE, _LAST)}
    pos = WANDB_HEADER.size
    pending: bytes | None = None
    while True:
        left = WANDB_BLOCK - pos % WANDB_BLOCK
        if left < WANDB_RECORD.size:
            fh.read(left)
            pos += left
        header = fh.read(WANDB_RECORD.size)
        if not header:
            return
        if len(header) < WANDB_RECORD.size:
            out.note(path, "the last record is cut off (run still being written, or file truncated); "
                           "read up to there")
            return
        crc, length, rtype = WANDB_RECORD.unpack(header)
        data = fh.read(length)
        pos += WANDB_RECORD.size + length
        if rtype not in seeds or len(data) < length or zlib.crc32(data, seeds[rtype]) != crc:
            if not (crc == 0 and length == 0 and rtype == 0):  # zero tail of a preallocated block
                out.note(path, f"damaged record at byte {pos - length - WANDB_RECORD.size} (checksum or "
                               "length wrong); read up to there")
            return
        if rtype == _FULL:
            yield data
        elif rtype == _FIRST:
            pending = data
        elif pending is not None:
            pending += data
            if rtype == _LAST:
                yield pending
                pending = None


def read_wandb_binary(path: Path, keep: Keep) -> Scalars:
    """History records of a `.wandb` run file (offline runs, or the local copy of any run),
    decoded with the wandb SDK's protobuf classes (`pip install 'precdx[wandb]'`). Rows are log
    calls; `_step` (W&B's counter) is a column like the others."""
    out = Scalars("wandb", str(path), by_row=True, files=[str(path)])
    try:
        from wandb.proto import wandb_internal_pb2
    except ImportError:
        out.note(path, "a binary W&B run file; reading it needs the wandb package (pip install "
                       "'precdx[wandb]'), or export the run's history as CSV / wandb-history.jsonl")
        return out
    row = 0
    try:
        with open(path, "rb") as fh:
            for data in _wandb_messages(fh, out, path):
                rec = wandb_internal_pb2.Record()
                try:
                    rec.ParseFromString(data)
                except Exception:  # noqa: BLE001 - protobuf DecodeError
                    out.note(path, "a record is not a W&B message; skipped")
                    continue
                if rec.WhichOneof("record_type") != "history":
                    continue
                row += 1
                for item in rec.history.item:
                    name = item.key or "/".join(item.nested_key)
                    try:
                        value = json.loads(item.value_json)
                    except (ValueError, RecursionError):
                        continue
                    if isinstance(value, bool):
                        continue
                    if isinstance(value, str):
                        value = _number_text(value)
                    if not isinstance(value, (int, float)):
                        continue
                    out.present.add(name)
                    if keep(name):
                        out.add(name, row, float(value))
    except OSError as exc:
        out.note(path, f"cannot read: {exc.strerror or exc}")
    return out
