"""Reading a byte range of dump.json with Python's C json scanner, for the parallel comparison.

`dumpdir.iter_entries` (ijson, bare NaN/Infinity rewritten, nesting guard) is the reference. This
reader parses one *range* of the file: from the start of the file, or from just after the comma
that ends an entry of the `data` object, to the end of the file or to the comma before another
entry. A worker per range lets every core parse a part of the same file.

It gives exactly the (name, body) pairs the reference gives, or raises `Unsupported` (the caller
then falls back to the reference for the whole comparison). Exactness, case by case:
- the structure is walked here (top-level object, the one `data` object, its members), so a
  range that does not start or end at an entry boundary of `data` is noticed, never misread;
- bare NaN / Infinity are rewritten with the reference's own `_rewrite` on blocks cut before a
  comma (the reference cuts the same way, so even text inside strings is rewritten alike);
- where json and yajl (ijson's C backend) differ, the block or value is `Unsupported`: \\u
  escapes (yajl turns a lone surrogate into '?'), integers of 19 or more digits (yajl overflows at
  64 bits), numbers beyond the float range (yajl: overflow error, json: inf), invalid UTF-8,
  nesting beyond what json's recursion allows (the reference stops at 1000 levels; json fails
  earlier, so a range that parses is never deeper than the reference allows);
- anything malformed is `Unsupported` too: the reference produces the error message.
"""
from __future__ import annotations

import functools
import json
import math
import re
from pathlib import Path
from typing import Any, BinaryIO, Iterator

from precdx.collectors.msprobe import jsonstream

_WS = re.compile(r"[ \t\n\r]*")
_SEP = re.compile(r'[ \t\n\r]*,[ \t\n\r]*(?=")')      # between two entries, up to the next name
_COLON = re.compile(r"[ \t\n\r]*:[ \t\n\r]*")
_INF = math.inf


class Unsupported(Exception):
    """This range cannot be read here with a guarantee of equality to the reference reader."""


class _Short(Exception):
    """The text read so far ends inside the current token."""


def _parse_int(text: str, _int=int) -> int:
    if len(text) > 18:   # may not fit 64 bits: yajl overflows (and restarts with another reader)
        raise Unsupported("an integer of 19 or more digits")
    return _int(text)


def _parse_float(text: str, _float=float) -> float:
    v = _float(text)
    if v == _INF or v == -_INF:   # a literal beyond the float range: yajl stops with an error
        raise Unsupported("a number beyond the float range")
    return v


def _parse_constant(name: str) -> float:
    raise Unsupported(f"a bare {name} the reference would not rewrite")


# integers repeat (shapes, indices): a C-level cache keeps the check off the common path
_DECODER = json.JSONDecoder(parse_int=functools.lru_cache(maxsize=1 << 14)(_parse_int), parse_float=_parse_float,
                            parse_constant=_parse_constant)
_SCAN = _DECODER.scan_once

# parser states
_T_OPEN, _T_FIRST, _T_AFTER, _T_NEXT, _T_END = range(5)      # top-level object
_D_FIRST, _D_AFTER, _D_NEXT = range(5, 8)                      # inside `data`


class RangeReader:
    """Entries of dump.json between byte offsets `start` and `end`.

    `start` is 0 (the file start) or the offset just after the comma that separates two `data`
    members; `end` is None (the end of the file) or the offset of such a comma. After
    `entries()` is exhausted, `end_offset` is where the reading stopped."""

    def __init__(self, path: Path | str, start: int = 0, end: int | None = None) -> None:
        self.path = Path(path)
        self.start = start
        self.end = end
        self.count = 0

    # ---------------------------------------------------------------- raw blocks
    def _blocks(self, fh: BinaryIO) -> Iterator[str]:
        """Decoded, rewritten text blocks, each cut just before a comma (like the reference)."""
        fh.seek(self.start)
        left = None if self.end is None else self.end - self.start
        carry = b""
        chunk_size = jsonstream._CHUNK
        while True:
            n = chunk_size if left is None else min(chunk_size, left)
            chunk = fh.read(n) if n > 0 else b""
            if left is not None:
                left -= len(chunk)
            if not chunk:
                if carry:
                    yield self._text(carry)
                return
            buf = carry + chunk
            cut = buf.rfind(b",")
            if cut <= 0:
                if len(buf) >= jsonstream._MAX_CARRY:
                    raise Unsupported("no comma in 64 MiB")
                carry = buf
                continue
            carry = buf[cut:]
            yield self._text(buf[:cut])

    @staticmethod
    def _text(raw: bytes) -> str:
        if b"\\" in raw and b"\\u" in raw:
            raise Unsupported("a \\u escape")
        if b"NaN" in raw or b"Infinity" in raw:
            raw = jsonstream._rewrite(raw)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise Unsupported("not UTF-8") from None

    # ---------------------------------------------------------------- the walk
    def entries(self) -> Iterator[tuple[str, Any]]:
        """(name, body) of every `data` member in the range, in file order."""
        with self.path.open("rb") as fh:
            yield from self._walk(self._blocks(fh))

    def _walk(self, blocks: Iterator[str]) -> Iterator[tuple[str, Any]]:
        ws, scan, sep, colon = _WS.match, _SCAN, _SEP.match, _COLON.match
        s, i = "", 0
        final = False
        state = _T_OPEN if self.start == 0 else _D_NEXT
        seen_data = self.start != 0
        to_eof = self.end is None
        while True:
            try:
                i = ws(s, i).end()
                if i == len(s):
                    if final:
                        if state == _T_END and to_eof:
                            return
                        if state == _D_AFTER and not to_eof:
                            return   # the range ends right after an entry: a boundary
                        raise Unsupported("the range ends inside the JSON")
                    raise _Short
                c = s[i]
                if state == _D_AFTER and c == ",":
                    # the common run of entries, with fewer steps; anything unusual (or the end
                    # of the text) leaves it for the general states below
                    n = len(s)
                    while True:
                        m = sep(s, i)
                        if m is None:
                            break
                        try:
                            key, j = scan(s, m.end())
                            m = colon(s, j)
                            if m is None:
                                break
                            body, j = scan(s, m.end())
                        except (StopIteration, json.JSONDecodeError):
                            break
                        except RecursionError:
                            raise Unsupported("nested too deeply for json") from None
                        if j == n and not final:
                            break
                        i = j
                        self.count += 1
                        yield key, body
                    i = ws(s, i).end()
                    if i == len(s):
                        continue
                    c = s[i]
                if state == _D_AFTER:
                    if c == ",":
                        state, i = _D_NEXT, i + 1
                    elif c == "}":
                        state, i = _T_AFTER, i + 1
                    else:
                        raise Unsupported("unexpected text after an entry")
                elif state == _D_FIRST or state == _D_NEXT:
                    if c == "}" and state == _D_FIRST:
                        state, i = _T_AFTER, i + 1
                        continue
                    if c != '"':
                        raise Unsupported("an entry name is not a string")
                    key, j = self._value(s, i, final, scan)
                    j = self._colon(s, j)
                    body, j = self._value(s, j, final, scan)
                    state, i = _D_AFTER, j
                    self.count += 1
                    yield key, body
                elif state == _T_OPEN:
                    if c != "{":
                        raise Unsupported("the top level is not an object")
                    state, i = _T_FIRST, i + 1
                elif state == _T_FIRST or state == _T_NEXT:
                    if c == "}" and state == _T_FIRST:
                        state, i = _T_END, i + 1
                        continue
                    if c != '"':
                        raise Unsupported("a key is not a string")
                    key, j = self._value(s, i, final, scan)
                    j = self._colon(s, j)
                    if key == "data":
                        if seen_data:
                            raise Unsupported("a second data object")
                        seen_data = True
                        j = ws(s, j).end()
                        if j == len(s):
                            raise _Short
                        if s[j] == "{":
                            state, i = _D_FIRST, j + 1
                            continue
                    _, j = self._value(s, j, final, scan)
                    state, i = _T_AFTER, j
                elif state == _T_AFTER:
                    if c == ",":
                        state, i = _T_NEXT, i + 1
                    elif c == "}":
                        state, i = _T_END, i + 1
                    else:
                        raise Unsupported("unexpected text after a top-level member")
                else:   # _T_END: only whitespace may follow
                    raise Unsupported("text after the top-level object")
            except _Short:
                if final:
                    raise Unsupported("the range ends inside the JSON") from None
                pending = len(s) - i
                if pending > jsonstream._MAX_CARRY:
                    raise Unsupported("one value longer than 64 MiB") from None
                parts = [s[i:]]
                got = 0
                while got <= pending:   # at least double what is pending: no quadratic re-parsing
                    nxt = next(blocks, None)
                    if nxt is None:
                        final = True
                        break
                    parts.append(nxt)
                    got += len(nxt)
                s, i = "".join(parts), 0

    @staticmethod
    def _colon(s: str, j: int) -> int:
        j = _WS.match(s, j).end()
        if j == len(s):
            raise _Short
        if s[j] != ":":
            raise Unsupported("a key without a colon")
        return j + 1

    @staticmethod
    def _value(s: str, j: int, final: bool, scan) -> tuple[Any, int]:
        j = _WS.match(s, j).end()
        if j == len(s):
            raise _Short
        try:
            value, end = scan(s, j)
        except (StopIteration, json.JSONDecodeError):
            raise _Short from None   # truncated here, or malformed (then the final read says so)
        except RecursionError:
            raise Unsupported("nested too deeply for json") from None
        if end == len(s) and not final:
            raise _Short   # a number at the end of the text may go on in the next block
        return value, end
