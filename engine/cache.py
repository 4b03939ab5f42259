"""An on-disk cache of what every call would otherwise rebuild from the same files: the parsed
and validated knowledge base, the compiled rule pack and its durable-rules program (0.3 s of a
`precdx diagnose` call). One JSON file per entry in the user's cache folder
($PRECDX_CACHE_DIR, else $XDG_CACHE_HOME/precdx, else ~/.cache/precdx).

An entry is found by a key that digests everything it was built from: the *contents* (and
paths) of the source files, the precdx version, the interpreter and pydantic versions, and a
stamp of the package's own files (size and modification time of each, so an edited collector,
compiler or schema is a different key too). A changed input is therefore a miss, never a stale
hit. Anything that goes wrong (no writable folder, a folder someone else owns, a truncated,
unreadable or unexpected entry) makes the cache step aside silently: the caller builds the value
as before. `PRECDX_CACHE_DIR=off` turns it off.

Entries are JSON, not pickle: reading one never runs code. Besides JSON's own values an entry
holds tuples, sets, compiled regexes and instances of the dataclasses and pydantic models of the
modules its caller names (rebuilt field by field, as pickling would, without running their
validators again); a class of any other module makes the entry unreadable, hence a miss.
"""
from __future__ import annotations

import dataclasses
import hashlib
import importlib
import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterable

from precdx import __version__

ENV = "PRECDX_CACHE_DIR"
_OFF = ("", "0", "off", "no", "none", "false")
KEEP = 8  # entries kept per kind (rule folders of tests come and go)
_PACKAGE = Path(__file__).resolve().parent
_stamp: str | None = None


def cache_dir() -> Path | None:
    """The cache folder, or None when caching is off."""
    env = os.environ.get(ENV)
    if env is not None:
        return None if env.strip().lower() in _OFF else Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "precdx"
    try:
        return Path.home() / ".cache" / "precdx"
    except RuntimeError:  # no home directory to speak of: no cache
        return None


def _package_stamp() -> str:
    """Size and mtime of every file of the package (sources, data, a wheel's rule pack)."""
    global _stamp
    if _stamp is None:
        h = hashlib.sha256()
        for dirpath, dirnames, filenames in os.walk(_PACKAGE):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            for name in sorted(filenames):
                st = os.stat(os.path.join(dirpath, name))
                h.update(f"{dirpath}/{name}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
        _stamp = h.hexdigest()
    return _stamp


def key(kind: str, files: Iterable[Path | str], *extra: Any) -> str | None:
    """The key of an entry built from `files` (their paths and contents; a folder by its path)
    and `extra` (reprs); None when a file cannot be read (the caller builds, and reports it)."""
    import pydantic

    h = hashlib.sha256()
    try:
        for part in (kind, __version__, sys.version, pydantic.VERSION, _package_stamp(), *map(repr, extra)):
            h.update(str(part).encode() + b"\0")
        for path in files:
            h.update(str(path).encode() + b"\0")
            if os.path.isdir(path):
                h.update(b"<folder>")
                continue
            with open(path, "rb") as fh:
                h.update(hashlib.sha256(fh.read()).digest())
    except OSError:
        return None
    return h.hexdigest()


# ---------------------------------------------------------------- entries as JSON
# An entry is two JSON lines: the classes its objects are of, then the value. Values JSON has
# no word for are one-key objects whose key starts with NUL: "\x00t" a tuple, "\x00s" a set,
# "\x00f" a frozenset, "\x00r" a regex [pattern, flags], "\x00o" an object [class index,
# field values in field order(, the fields set, for a pydantic model, as a bit mask)], and
# "\x00d" the [key, value] pairs of a dict whose keys are not all plain strings.
_TAGS = frozenset(("\x00t", "\x00s", "\x00f", "\x00r", "\x00o", "\x00d"))


def _fields(cls: type) -> tuple[str, ...]:
    if dataclasses.is_dataclass(cls):
        return tuple(f.name for f in dataclasses.fields(cls))
    return tuple(cls.__pydantic_fields__)


class _Encoder:
    def __init__(self) -> None:
        self.classes: dict[type, int] = {}

    def names(self) -> list[str]:
        return [f"{c.__module__}:{c.__qualname__}" for c in self.classes]

    def __call__(self, obj: Any) -> Any:
        enc = self
        if obj is None or isinstance(obj, (bool, int, float, str)):
            return obj
        if isinstance(obj, list):
            return [enc(v) for v in obj]
        if isinstance(obj, tuple):
            return {"\x00t": [enc(v) for v in obj]}
        if isinstance(obj, dict):
            if all(isinstance(k, str) and not k.startswith("\x00") for k in obj):
                return {k: enc(v) for k, v in obj.items()}
            return {"\x00d": [[enc(k), enc(v)] for k, v in obj.items()]}
        if isinstance(obj, frozenset):
            return {"\x00f": [enc(v) for v in obj]}
        if isinstance(obj, set):
            return {"\x00s": [enc(v) for v in obj]}
        if isinstance(obj, re.Pattern):
            return {"\x00r": [obj.pattern, obj.flags]}
        cls = type(obj)
        index = self.classes.setdefault(cls, len(self.classes))
        names = _fields(cls) if dataclasses.is_dataclass(obj) or hasattr(obj, "__pydantic_fields_set__") else None
        if names is None:
            raise TypeError(f"cannot cache a {cls.__module__}.{cls.__qualname__}")
        values = [enc(getattr(obj, n)) for n in names]
        if dataclasses.is_dataclass(obj):
            return {"\x00o": [index, values]}
        state = obj.__getstate__()
        if state.get("__pydantic_extra__") or state.get("__pydantic_private__") or set(state["__dict__"]) != set(names):
            raise TypeError(f"cannot cache a {cls.__qualname__} with extra or private attributes")
        given = state["__pydantic_fields_set__"]
        return {"\x00o": [index, values, sum(1 << i for i, n in enumerate(names) if n in given)]}


class _Decoder:
    """`json.loads` object hook turning tagged objects back into values. Objects are only of
    dataclasses and pydantic models defined in the modules the caller named."""

    def __init__(self, names: list[str], modules: Iterable[str]) -> None:
        allowed = {m: importlib.import_module(m) for m in modules}
        self.classes: list[tuple[type, tuple[str, ...], bool]] = []
        for name in names:
            module, _, qualname = name.partition(":")
            cls: Any = allowed[module]  # KeyError: a module the caller did not name
            for part in qualname.split("."):
                cls = getattr(cls, part)
            plain = dataclasses.is_dataclass(cls)
            if not isinstance(cls, type) or cls.__module__ != module or not (
                    plain or hasattr(cls, "__pydantic_fields__")):
                raise TypeError(f"not a cacheable class: {name}")
            self.classes.append((cls, _fields(cls), plain))

    def __call__(self, d: dict) -> Any:
        if len(d) != 1:
            return d
        key = next(iter(d))
        if key not in _TAGS:
            return d
        value = d[key]
        if key == "\x00o":
            cls, names, plain = self.classes[value[0]]
            obj = cls.__new__(cls)
            if plain:
                if len(value[1]) != len(names):
                    raise ValueError(f"{cls.__qualname__}: {len(value[1])} values for {len(names)} fields")
                for name, v in zip(names, value[1]):
                    object.__setattr__(obj, name, v)
            else:
                if len(value[1]) != len(names):
                    raise ValueError(f"{cls.__qualname__}: {len(value[1])} values for {len(names)} fields")
                given = {n for i, n in enumerate(names) if value[2] >> i & 1}
                obj.__setstate__({"__dict__": dict(zip(names, value[1])), "__pydantic_fields_set__": given,
                                  "__pydantic_extra__": None, "__pydantic_private__": None})
            return obj
        if key == "\x00t":
            return tuple(value)
        if key == "\x00d":
            return {k: v for k, v in value}
        if key == "\x00s":
            return set(value)
        if key == "\x00f":
            return frozenset(value)
        return re.compile(value[0], value[1])


def _usable(folder: Path) -> bool:
    """The folder exists (created private if not), is ours and is not writable by others."""
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = folder.stat()
    except OSError:
        return False
    if hasattr(os, "getuid") and (st.st_uid != os.getuid() or st.st_mode & 0o022):
        return False
    return True


def _path(folder: Path, kind: str, entry_key: str) -> Path:
    return folder / f"{kind}-{entry_key}.json"


def load(kind: str, entry_key: str, modules: Iterable[str] = ()) -> Any | None:
    """The value stored under this key, or None (miss, caching off, unreadable entry).
    `modules`: where the classes of its objects may come from."""
    folder = cache_dir()
    if folder is None:
        return None
    path = _path(folder, kind, entry_key)
    try:
        if not path.is_file() or not _usable(folder):
            return None
        names, _, body = path.read_text(encoding="utf-8").partition("\n")
        return json.loads(body, object_hook=_Decoder(json.loads(names), modules))
    except Exception:  # noqa: BLE001 - a broken entry is a miss; it is overwritten below
        return None


def store(kind: str, entry_key: str, value: Any) -> None:
    """Write an entry atomically (a reader never sees half of one) and keep the KEEP newest of
    its kind; any failure (a value that cannot be written, a full disk) leaves no entry."""
    folder = cache_dir()
    if folder is None or not _usable(folder):
        return
    tmp = None
    try:
        encode = _Encoder()
        body = json.dumps(encode(value), separators=(",", ":"))
        data = json.dumps(encode.names()) + "\n" + body
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{kind}-", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(data)
        os.replace(tmp, _path(folder, kind, entry_key))
        tmp = None
        entries = sorted(folder.glob(f"{kind}-*.json"), key=lambda p: p.stat().st_mtime_ns, reverse=True)
        for old in entries[KEEP:]:
            old.unlink(missing_ok=True)
    except Exception:  # noqa: BLE001 - an unwritable value, a full disk, a race: no cache
        pass
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def cached(kind: str, entry_key: str | None, build: Callable[[], Any], modules: Iterable[str] = ()) -> Any:
    """`build()`, or the value a previous call stored under `entry_key` (None: do not cache).
    `modules` name the modules whose dataclasses and pydantic models the value holds."""
    if entry_key is not None:
        hit = load(kind, entry_key, modules)
        if hit is not None:
            return hit
    value = build()
    if entry_key is not None:
        store(kind, entry_key, value)
    return value
