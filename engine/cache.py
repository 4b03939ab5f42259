"""An on-disk cache of what every call would otherwise rebuild from the same files: the parsed
and validated knowledge base, the compiled rule pack and its durable-rules program (0.3 s of a
`precdx diagnose` call). One pickle per entry in the user's cache folder
($PRECDX_CACHE_DIR, else $XDG_CACHE_HOME/precdx, else ~/.cache/precdx).

An entry is found by a key that digests everything it was built from: the *contents* (and
paths) of the source files, the precdx version, the interpreter and pydantic versions, and a
stamp of the package's own files (size and modification time of each, so an edited collector,
compiler or schema is a different key too). A changed input is therefore a miss, never a stale
hit. Anything that goes wrong (no writable folder, a folder someone else owns, a truncated or
unreadable entry) makes the cache step aside silently: the caller builds the value as before.
`PRECDX_CACHE_DIR=off` turns it off.
"""
from __future__ import annotations

import hashlib
import os
import pickle
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
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "precdx"


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


def load(kind: str, entry_key: str) -> Any | None:
    """The value stored under this key, or None (miss, caching off, unreadable entry)."""
    folder = cache_dir()
    if folder is None:
        return None
    path = folder / f"{kind}-{entry_key}.pickle"
    try:
        if not path.is_file() or not _usable(folder):
            return None
        with open(path, "rb") as fh:
            return pickle.load(fh)
    except Exception:  # noqa: BLE001 - a broken entry is a miss; it is overwritten below
        return None


def store(kind: str, entry_key: str, value: Any) -> None:
    """Write an entry atomically (a reader never sees half of one) and keep the KEEP newest of
    its kind; any failure leaves the cache as it was."""
    folder = cache_dir()
    if folder is None or not _usable(folder):
        return
    tmp = None
    try:
        data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{kind}-", suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, folder / f"{kind}-{entry_key}.pickle")
        tmp = None
        entries = sorted(folder.glob(f"{kind}-*.pickle"), key=lambda p: p.stat().st_mtime_ns, reverse=True)
        for old in entries[KEEP:]:
            old.unlink(missing_ok=True)
    except Exception:  # noqa: BLE001 - an unpicklable value, a full disk, a race: no cache
        pass
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def cached(kind: str, entry_key: str | None, build: Callable[[], Any]) -> Any:
    """`build()`, or the value a previous call stored under `entry_key` (None: do not cache)."""
    if entry_key is not None:
        hit = load(kind, entry_key)
        if hit is not None:
            return hit
    value = build()
    if entry_key is not None:
        store(kind, entry_key, value)
    return value
