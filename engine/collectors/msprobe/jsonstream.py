"""Reading msprobe JSON files: a streaming reader for big dump.json files (ijson, C backend
when available) and a small-file loader, both tolerant of Python's bare NaN/Infinity tokens.

msprobe writes NaN, Infinity and -Infinity unquoted (Python json). yajl rejects them, so the
stream is rewritten on the fly: each bare token becomes a tiny sub-normal sentinel number that
no real float32/bf16 statistic can take, and `denan` maps the sentinels back.
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any, BinaryIO, Iterator

import ijson
import numpy as np

from precdx.errors import PrecdxError

try:  # the C backend is ~10x faster; fall back quietly when the wheel lacks it
    _IJSON = ijson.get_backend("yajl2_c")
except Exception:  # pragma: no cover - depends on the installed wheel
    _IJSON = ijson
# The pure-Python backend reads integers beyond 64 bits, which make yajl give up on the whole file.
_IJSON_PY = ijson.get_backend("python")

_NAN, _POS_INF, _NEG_INF = 7.7e-321, 8.8e-321, -8.8e-321
_TOKEN = re.compile(rb"([:\[,]\s*)(NaN|-Infinity|Infinity)")
_REPLACEMENT = {b"NaN": b"7.7e-321", b"Infinity": b"8.8e-321", b"-Infinity": b"-8.8e-321"}
_CHUNK = 1 << 20
_MAX_CARRY = 64 << 20
# ijson's memory grows with the square of the nesting depth (1 GB at 20 000 levels); msprobe's own
# files are ~10 levels deep. A file nested deeper than this stops with NestingTooDeep.
MAX_DEPTH = 1000
_KEEP = b'"[]{}'
_DROP = bytes(c for c in range(256) if c not in _KEEP)
_STEP = np.zeros(256, dtype=np.int32)
_STEP[ord("[")] = _STEP[ord("{")] = 1
_STEP[ord("]")] = _STEP[ord("}")] = -1


class NestingTooDeep(ValueError):
    """The JSON nests arrays/objects deeper than the reader's limit."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"nested more than {limit} levels deep")
        self.limit = limit


class NestingGuard:
    """Tracks the nesting depth of a JSON byte stream fed block by block (brackets inside strings
    do not count) and raises NestingTooDeep past `limit`. Costs a few byte-level passes per block."""

    def __init__(self, limit: int = MAX_DEPTH) -> None:
        self.limit = limit
        self.depth = 0
        self.in_string = False
        self._backslash = b""

    def feed(self, block: bytes) -> None:
        data = self._backslash + block
        self._backslash = b""
        run = len(data) - len(data.rstrip(b"\\"))
        if run % 2:                      # an escape cut in two: finish it with the next block
            data, self._backslash = data[:-1], b"\\"
        if b"\\" in data:
            data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
        reduced = data.translate(None, _DROP)
        if not reduced:
            return
        parts = reduced.split(b'"')
        # parts alternate outside/inside strings, starting inside when a string was open
        outside = b"".join(parts[1::2] if self.in_string else parts[0::2])
        if (len(parts) - 1) % 2:
            self.in_string = not self.in_string
        if not outside:
            return
        steps = _STEP[np.frombuffer(outside, dtype=np.uint8)]
        peak = self.depth + int(np.cumsum(steps).max())
        if peak > self.limit:
            raise NestingTooDeep(self.limit)
        self.depth += int(steps.sum())


def _rewrite(block: bytes) -> bytes:
    if b"NaN" not in block and b"Infinity" not in block:
        return block
    return _TOKEN.sub(lambda m: m.group(1) + _REPLACEMENT[m.group(2)], block)


class NonFiniteTolerantReader:
    """File-like wrapper rewriting bare NaN/Infinity tokens; cuts blocks just before a comma so a
    token and the delimiter in front of it are never split between two blocks."""

    def __init__(self, raw: BinaryIO, guard: NestingGuard | None = None) -> None:
        self._raw = raw
        self._guard = guard
        self._carry = b""
        self._out = b""
        self._pos = 0
        self.bytes_read = 0

    def _next_block(self) -> bytes:
        while True:
            chunk = self._raw.read(_CHUNK)
            self.bytes_read += len(chunk)
            if self._guard is not None and chunk:
                self._guard.feed(chunk)
            if not chunk:
                block, self._carry = self._carry, b""
                return _rewrite(block)
            buf = self._carry + chunk
            # cut before the last comma: the delimiter stays with the token it introduces
            cut = buf.rfind(b",")
            if cut <= 0 and len(buf) < _MAX_CARRY:
                self._carry = buf
                continue
            cut = cut if cut > 0 else len(buf)
            self._carry = buf[cut:]
            return _rewrite(buf[:cut])

    def read(self, size: int = -1) -> bytes:
        if self._pos >= len(self._out):
            self._out = self._next_block()
            self._pos = 0
        if size is None or size < 0:
            size = len(self._out) - self._pos
        piece = self._out[self._pos:self._pos + size]
        self._pos += len(piece)
        return piece


def denan(value: Any) -> Any:
    """Map a sentinel back to NaN/+Inf/-Inf; other values pass through."""
    if type(value) is float and value != 0.0 and abs(value) < 1e-300:
        if value == _NAN:
            return math.nan
        if value == _POS_INF:
            return math.inf
        if value == _NEG_INF:
            return -math.inf
    return value


def denan_tree(value: Any) -> Any:
    """`denan` applied to every float inside nested lists/dicts."""
    if isinstance(value, dict):
        return {k: denan_tree(v) for k, v in value.items()}
    if isinstance(value, list):
        return [denan_tree(v) for v in value]
    return denan(value)


def stream_kvitems(fh: BinaryIO, prefix: str, *, big_ints: bool = False,
                   max_depth: int = MAX_DEPTH) -> Iterator[tuple[str, Any]]:
    """(key, value) pairs of the object at `prefix`, one at a time; values keep sentinels
    (callers use `denan` on the few numbers they read). NestingTooDeep past `max_depth`;
    `big_ints`: the slower pure-Python reader, which takes integers beyond 64 bits."""
    backend = _IJSON_PY if big_ints else _IJSON
    return backend.kvitems(NonFiniteTolerantReader(fh, NestingGuard(max_depth)), prefix, use_float=True)


def is_int_overflow(exc: Exception) -> bool:
    """yajl's error for an integer beyond 64 bits (the pure-Python reader takes those)."""
    return "integer overflow" in str(exc)


def json_error_message(exc: Exception) -> str:
    """A one-line reason from an ijson/json error."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if "incomplete" in text.lower() or "premature" in text.lower():
        return "the file ends in the middle of the JSON (truncated?)"
    return f"not valid JSON ({text})"


def load_small_json(path: Path, *, what: str) -> Any:
    """Load a small JSON file (stack.json, construct.json, analysis outputs) with Python's json,
    which accepts bare NaN/Infinity. Errors become PrecdxError naming the file."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise PrecdxError(f"cannot read {what}: {exc.strerror or exc}", path=str(path)) from None
    if not raw.strip():
        raise PrecdxError(f"{what} is empty", path=str(path))
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise PrecdxError(f"{what} is not UTF-8 text (binary file?)", path=str(path)) from None
    try:
        NestingGuard().feed(raw)
    except NestingTooDeep as exc:
        raise PrecdxError(f"{what} is {exc}: not read", path=str(path)) from None
    try:
        return json.loads(text)
    except RecursionError:
        raise PrecdxError(f"{what} is nested too deeply: not read", path=str(path)) from None
    except json.JSONDecodeError as exc:
        if exc.pos >= len(text.rstrip()) - 1:
            raise PrecdxError(f"{what} ends in the middle of the JSON (truncated?)",
                              path=str(path), line=exc.lineno) from None
        raise PrecdxError(f"{what} is not valid JSON: {exc.msg}", path=str(path),
                          line=exc.lineno) from None
