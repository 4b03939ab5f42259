"""Text the durable-rules C parser accepts, and names it cannot confuse: float formatting
(never `1e-05`), a JSON writer for rulesets, and collision-free fact ids and session ids
(the engine indexes both by a 32-bit FNV-1a hash and compares hashes only)."""
from __future__ import annotations

import json
import math
import threading
from typing import Any

from precdx.errors import PrecdxError

_FNV_OFFSET = 2166136261
_FNV_PRIME = 16777619
MAX_EXACT_INT = 2 ** 53  # integers beyond this cannot be compared exactly as doubles


def fnv1a32(text: str) -> int:
    """The engine's `fnv1Hash32`: FNV-1a over the UTF-8 bytes, each read as a signed C char."""
    h = _FNV_OFFSET
    for byte in text.encode("utf-8"):
        if byte >= 0x80:
            byte |= 0xFFFFFF00
        h = ((h ^ byte) * _FNV_PRIME) & 0xFFFFFFFF
    return h


def format_float(value: float) -> str:
    """A finite double as JSON the C parser reads back exactly: `repr`, with a fraction
    inserted before any exponent (`1e-05` -> `1.0e-05`; the parser rejects the former), and
    negative zero written as zero."""
    if not math.isfinite(value):
        raise ValueError(f"non-finite number {value!r} cannot be sent to the durable engine")
    if value == 0.0:
        # -0.0 == 0.0, but the engine indexes equality joins by the "%f" text of a value,
        # where the two differ ("-0.000000"), so an equal pair would never meet.
        return "0.0"
    text = repr(float(value))
    mant, sep, exp = text.partition("e")
    if sep and "." not in mant:
        text = f"{mant}.0e{exp}"
    return text


def format_number(value: Any) -> str:
    """An int or float as a JSON double. All numbers go to the engine as doubles because its
    join comparison of an int with an equal double is false (1 == 1.0 fails in beta nodes)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"not a number: {value!r}")
    if isinstance(value, int) and abs(value) > MAX_EXACT_INT:
        raise OverflowError(f"integer {value} is too large to compare exactly in the durable engine")
    return format_float(float(value))


def format_string(value: str) -> str:
    # ASCII-escaped JSON: facts and rule literals use the same encoder, and the engine
    # compares the raw escaped text, so equal strings give equal text.
    return json.dumps(value)


def dumps(obj: Any) -> str:
    """JSON for a ruleset definition. Ints stay ints (settings such as `pri`, `$ex` markers);
    floats are written by `format_float`, so literals meant as doubles must be floats."""
    if isinstance(obj, dict):
        return "{" + ",".join(f"{format_string(str(k))}:{dumps(v)}" for k, v in obj.items()) + "}"
    if isinstance(obj, (list, tuple)):
        return "[" + ",".join(dumps(v) for v in obj) + "]"
    if isinstance(obj, bool):
        return "true" if obj else "false"
    if isinstance(obj, int):
        return str(obj)
    if isinstance(obj, float):
        return format_float(obj)
    if isinstance(obj, str):
        return format_string(obj)
    if obj is None:
        return "null"
    raise TypeError(f"cannot serialise {type(obj).__name__} for the durable engine")


class _HashedNames:
    """An append-only list of names whose FNV-1a hashes are pairwise distinct and avoid a
    reserved set; any prefix of the list is therefore collision-free. Thread-safe."""

    def __init__(self, make, reserved: set[int] = frozenset()) -> None:
        self._make = make
        self._seen: set[int] = set(reserved)
        self.names: list[str] = []
        self.index: dict[str, int] = {}
        self._next = 0
        self._lock = threading.Lock()

    def ensure(self, n: int) -> list[str]:
        if len(self.names) < n:
            with self._lock:
                while len(self.names) < n:
                    name = self._make(self._next)
                    self._next += 1
                    h = fnv1a32(name)
                    if h in self._seen:
                        continue
                    self._seen.add(h)
                    self.index[name] = len(self.names)
                    self.names.append(name)
        return self.names


MAX_SIDS = 1024  # the engine keeps at most 1024 live sessions per ruleset
SESSION_IDS = _HashedNames(lambda i: f"s{i}")
SESSION_IDS.ensure(MAX_SIDS)
# The engine stores one state fact per session under id "sid-<sid>"; fact ids avoid its hash.
FACT_IDS = _HashedNames(lambda i: format(i, "x"),
                        reserved={fnv1a32(f"sid-{s}") for s in SESSION_IDS.names})


def fact_ids(n: int) -> list[str]:
    """At least `n` fact ids, pairwise hash-distinct (slot i is always the same id)."""
    return FACT_IDS.ensure(n)


def fact_index(fact_id: str) -> int:
    return FACT_IDS.index[fact_id]


def check_property_hashes(names: list[str], where: str) -> None:
    """Property names of one fact are also looked up by hash only."""
    seen: dict[int, str] = {}
    for name in names:
        h = fnv1a32(name)
        if h in seen and seen[h] != name:
            raise PrecdxError(f"{where}: fields {seen[h]!r} and {name!r} collide in the durable "
                              "engine's 32-bit property hash", hint="use --engine python", exit_code=3)
        seen[h] = name
