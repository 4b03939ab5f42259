"""The block reader's compiled kernels (scan.c beside this module), loaded with ctypes.

The C source ships with the package and is compiled on first use with the machine's C compiler
(`cc`, or $CC) into a per-user cache, `$XDG_CACHE_HOME/precdx/native/` (~/.cache when unset),
under a name that carries the hash of the source and of the platform, so an edited source or
another machine never loads a stale library. `make setup` builds it once. No compiler, a cache
that cannot be written, a failed build, or PRECDX_NATIVE=0: `kernels()` is None and the block
reader does the same work with numpy (same results; the tests compare both paths).

ctypes releases the GIL for the duration of a call, so two blocks are scanned on two cores.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

SOURCE = Path(__file__).with_name("scan.c")
_lock = threading.Lock()
_loaded: "Kernels | None | bool" = False  # False: not tried yet
_why: str = ""

_i64p = ctypes.POINTER(ctypes.c_int64)
_u8p = ctypes.POINTER(ctypes.c_uint8)
_i8p = ctypes.POINTER(ctypes.c_int8)
_f64p = ctypes.POINTER(ctypes.c_double)


class Kernels:
    """The loaded library's functions, typed. Blocks are passed by address (`c_void_p`): a
    block is a bytes or bytearray object the caller keeps alive for the call."""

    def __init__(self, lib: ctypes.CDLL, path: Path) -> None:
        self.path = path
        self.lines = lib.pdx_lines
        self.lines.restype = ctypes.c_int64
        self.lines.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, _i64p, _i64p, _u8p, _i64p]
        self.number = lib.pdx_number
        self.number.restype = ctypes.c_int
        self.number.argtypes = [ctypes.c_char_p, ctypes.c_int64, _f64p]
        self.match = lib.pdx_match
        self.match.restype = ctypes.c_int64
        self.match.argtypes = [ctypes.c_void_p, _i64p, _i64p, _i64p, ctypes.c_int64,
                               ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int64, ctypes.c_char_p, _i64p,
                               ctypes.c_char_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                               _i8p, _f64p, _u8p, _i64p, _i64p]


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "precdx" / "native"


def library_path() -> Path:
    """Where the library built from this source for this platform lives."""
    h = hashlib.sha256(SOURCE.read_bytes())
    h.update(f"{sys.platform}-{platform.machine()}-{ctypes.sizeof(ctypes.c_void_p)}".encode())
    suffix = ".dll" if sys.platform == "win32" else ".dylib" if sys.platform == "darwin" else ".so"
    return cache_dir() / f"scan-{h.hexdigest()[:16]}{suffix}"


def _compiler() -> str | None:
    cc = os.environ.get("CC")
    if cc and shutil.which(cc.split()[0]):
        return cc
    for name in ("cc", "gcc", "clang"):
        if shutil.which(name):
            return name
    return None


def build(force: bool = False) -> Path:
    """Compile scan.c into the cache (atomically: a concurrent build never leaves half a file).
    Returns the library's path; raises RuntimeError saying why it could not be built."""
    target = library_path()
    if target.is_file() and not force:
        return target
    cc = _compiler()
    if cc is None:
        raise RuntimeError("no C compiler (cc, gcc, clang or $CC) on PATH")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RuntimeError(f"cannot create {target.parent}: {exc}") from None
    fd, tmp = tempfile.mkstemp(prefix=target.stem + ".", suffix=".tmp", dir=target.parent)
    os.close(fd)
    try:
        cmd = cc.split() + ["-O2", "-shared", "-fPIC", "-o", tmp, str(SOURCE)]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed: {(done.stderr or done.stdout).strip()[:500]}")
        os.replace(tmp, target)
    except (OSError, subprocess.SubprocessError) as exc:
        raise RuntimeError(f"building {SOURCE.name} failed: {exc}") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target


def kernels() -> Kernels | None:
    """The compiled kernels, built on first use; None (with `why()` saying why) when they cannot
    be had or PRECDX_NATIVE=0 is set."""
    global _loaded, _why
    if os.environ.get("PRECDX_NATIVE", "1").strip().lower() in {"0", "false", "no", "off"}:
        return None
    if _loaded is not False:
        return _loaded or None
    with _lock:
        if _loaded is False:
            try:
                path = build()
                _loaded = Kernels(ctypes.CDLL(str(path)), path)
            except (RuntimeError, OSError, AttributeError) as exc:
                _loaded, _why = None, str(exc)
    return _loaded or None


def why() -> str:
    """Why `kernels()` is None ('' when loaded or not tried)."""
    if os.environ.get("PRECDX_NATIVE", "1").strip().lower() in {"0", "false", "no", "off"}:
        return "PRECDX_NATIVE=0"
    return _why


def lines(kern: Kernels, body, address: int):
    """(starts, ends, candidates, longest) of a block of whole lines (`body`, any buffer, whose
    data is at `address`; it must stay alive), as `Kernels.lines` finds them."""
    import numpy as np

    cap = len(body) // 40 + 16  # typical lines are longer; a second call gets the exact room
    while True:
        starts = np.empty(cap, dtype=np.int64)
        ends = np.empty(cap, dtype=np.int64)
        cand = np.empty(cap, dtype=np.uint8)
        longest = ctypes.c_int64(0)
        n = int(kern.lines(address, len(body), cap, ptr(starts), ptr(ends), ptr(cand, _u8p), ctypes.byref(longest)))
        if n >= 0:
            return starts[:n], ends[:n], cand[:n], longest.value
        cap = -n


def number(kern: Kernels, text: bytes) -> float | None:
    """A value as the kernels read it, or None when they leave it to the shared number grammar."""
    out = ctypes.c_double()
    return out.value if kern.number(text, len(text), ctypes.byref(out)) else None


def ptr(a, kind=_i64p):
    """A numpy array's data as a ctypes pointer (the array must stay alive during the call)."""
    return a.ctypes.data_as(kind)


if __name__ == "__main__":  # python -m precdx.collectors.logs.native: build now (make setup)
    try:
        print(build(force="--force" in sys.argv))
    except RuntimeError as exc:
        print(f"precdx: the block reader's compiled kernels were not built ({exc}); the numpy path is used",
              file=sys.stderr)
