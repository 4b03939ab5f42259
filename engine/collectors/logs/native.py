"""The block reader's compiled kernels (scan.c beside this module), loaded with ctypes.

The library is built ahead of time from scan.c by `tools/build_native.py` (`make setup` runs
it; nothing in the engine starts a process) and looked for, under a name that carries the hash
of the source and of the platform (an edited source or another machine never loads a stale
library), next to this module and then in `$XDG_CACHE_HOME/precdx/native/` (~/.cache when
unset; where the tool writes when the package folder is read-only). Not built, not loadable,
or PRECDX_NATIVE=0: `kernels()` is None and the block reader does the same work with numpy
(same results; the tests compare both paths).

ctypes releases the GIL for the duration of a call, so two blocks are scanned on two cores.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import sys
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
_u64p = ctypes.POINTER(ctypes.c_uint64)
_i32p = ctypes.POINTER(ctypes.c_int32)
_u32p = ctypes.POINTER(ctypes.c_uint32)


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
                               ctypes.c_char_p, ctypes.c_int64,
                               ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                               _i8p, _f64p, _u8p, _i64p, _i64p]
        self.shapes = lib.pdx_shapes
        self.shapes.restype = None
        self.shapes.argtypes = [ctypes.c_void_p, _i64p, _i64p, _i64p, ctypes.c_int64, _u64p, _i32p, ctypes.c_int64,
                                ctypes.c_char_p, _i64p, _u8p, _u64p, _i32p, _u8p, _i64p, _i64p, _i64p, ctypes.c_int64,
                                _f64p, _u8p, ctypes.c_int64, _u64p, _u64p, _i32p, _i32p, _u8p, _i32p, _i32p,
                                ctypes.c_int64]
        self.shape_hash = lib.pdx_shape_hash
        self.shape_hash.restype = ctypes.c_uint64
        self.shape_hash.argtypes = [ctypes.c_char_p, ctypes.c_int64, ctypes.c_int]
        self.token = lib.pdx_token
        self.token.restype = ctypes.c_int
        self.token.argtypes = [ctypes.c_char_p, ctypes.c_int64, _f64p]
        lits = [ctypes.c_char_p, _i64p, _u32p, _i32p, ctypes.c_int64, _u8p, _i32p, ctypes.c_int64]
        self.olmo = lib.pdx_olmo
        self.olmo.restype = None
        self.olmo.argtypes = [ctypes.c_void_p, _i64p, _i64p, _i64p, ctypes.c_int64, ctypes.c_char_p, _i64p, _i8p, _u8p,
                              ctypes.c_int64, *lits, _u8p, _i64p, _f64p, _u64p, _i8p, _f64p, _u8p, _u8p]
        self.wrapped = lib.pdx_wrapped
        self.wrapped.restype = ctypes.c_int64
        self.wrapped.argtypes = [ctypes.c_void_p, _i64p, _i64p, ctypes.c_int64, _u8p, ctypes.c_int64, *lits, *lits,
                                 ctypes.c_int64, _i64p, _i64p, _u8p, _i64p]
        self.nanotron = lib.pdx_nanotron
        self.nanotron.restype = ctypes.c_int64
        self.nanotron.argtypes = [ctypes.c_void_p, _i64p, _i64p, ctypes.c_int64, _u8p, *lits, ctypes.c_int64, _i64p,
                                  _f64p, _f64p, _u8p]
        self.fold = lib.pdx_fold
        self.fold.restype = None
        self.fold.argtypes = [ctypes.c_int64, ctypes.c_int64, _i64p] + [_f64p] * 8 + [_i64p, _i64p, _f64p, _f64p]


def cache_dir() -> Path | None:
    base = os.environ.get("XDG_CACHE_HOME")
    if not base:
        try:
            base = str(Path.home() / ".cache")
        except RuntimeError:  # no home directory
            return None
    return Path(base) / "precdx" / "native"


def library_name(source: Path | None = None) -> str:
    """The file name of the library built from `source` (default: scan.c) for this platform."""
    h = hashlib.sha256((source or SOURCE).read_bytes())
    h.update(f"{sys.platform}-{platform.machine()}-{ctypes.sizeof(ctypes.c_void_p)}".encode())
    suffix = ".dll" if sys.platform == "win32" else ".dylib" if sys.platform == "darwin" else ".so"
    return f"_scan-{h.hexdigest()[:16]}{suffix}"


def candidates() -> list[Path]:
    """Where the library is looked for, in order."""
    name = library_name()
    out = [SOURCE.with_name(name)]
    cache = cache_dir()
    if cache is not None:
        out.append(cache / name)
    return out


def _off() -> bool:
    return os.environ.get("PRECDX_NATIVE", "1").strip().lower() in {"0", "false", "no", "off"}


def kernels() -> Kernels | None:
    """The compiled kernels; None (with `why()` saying why) when they are not built, cannot be
    loaded, or PRECDX_NATIVE=0 is set."""
    global _loaded, _why
    if _off():
        return None
    if _loaded is not False:
        return _loaded or None
    with _lock:
        if _loaded is False:
            found = next((p for p in candidates() if p.is_file()), None)
            if found is None:
                _loaded, _why = None, ("not built for this source (python tools/build_native.py, "
                                       "which make setup runs, builds them)")
            else:
                try:
                    _loaded = Kernels(ctypes.CDLL(str(found)), found)
                except (OSError, AttributeError) as exc:
                    _loaded, _why = None, f"{found} cannot be loaded: {exc}"
    return _loaded or None


def why() -> str:
    """Why `kernels()` is None ('' when loaded or not tried)."""
    return "PRECDX_NATIVE=0" if _off() else _why


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


def token(kern: Kernels, text: bytes) -> float | None:
    """A token as the shapes' reader reads it (scan.c: read_token), or None when it is left to
    the parsers."""
    out = ctypes.c_double()
    return out.value if kern.token(text, len(text), ctypes.byref(out)) else None


def ptr(a, kind=_i64p):
    """A numpy array's data as a ctypes pointer (the array must stay alive during the call)."""
    return a.ctypes.data_as(kind)


CACHE_SLOTS = 1024
CACHE_KEY = 512  # scan.c's


class Cache:
    """scan.c's lines' cache for one scan thread and one shapes.Table (see line_key there)."""

    def __init__(self, table) -> None:
        import numpy as np

        self.table = table
        width = max(1, table.width)
        self.key = np.zeros(CACHE_SLOTS, dtype=np.uint64)
        self.hash = np.zeros(CACHE_SLOTS, dtype=np.uint64)
        self.tid = np.zeros(CACHE_SLOTS, dtype=np.int32)
        self.len = np.zeros(CACHE_SLOTS, dtype=np.int32)
        self.bytes = np.zeros(CACHE_SLOTS * CACHE_KEY, dtype=np.uint8)
        self.tok_at = np.zeros(CACHE_SLOTS * width, dtype=np.int32)
        self.tok_len = np.zeros(CACHE_SLOTS * width, dtype=np.int32)


def shapes(kern: Kernels, address: int, starts, ends, idx, table, values: bool = False, cache: Cache | None = None):
    """(hashes, shape numbers) of lines `idx` of a block (see scan.c: pdx_shapes; `table` a
    shapes.Table); with `values`, also (values, slow): a row of token values per line of a shape
    that reads them (other rows left NaN) and which lines hold a token not read exactly, in the
    same pass, using and filling `cache` when given (one made for `table`)."""
    assert cache is None or (values and cache.table is table)
    import numpy as np

    n = int(idx.size)
    hashes = np.empty(n, dtype=np.uint64)
    tid = np.empty(n, dtype=np.int32)
    out = slow = None
    if values:
        out = np.full((n, max(1, table.width)), np.nan)
        slow = np.zeros(n, dtype=np.uint8)
    if n:
        kern.shapes(address, ptr(starts), ptr(ends), ptr(idx), n, ptr(table.keys, _u64p), ptr(table.vals, _i32p),
                    table.mask, table.skel, ptr(table.skel_off), ptr(table.redirect, _u8p), ptr(hashes, _u64p),
                    ptr(tid, _i32p), ptr(table.reads, _u8p), ptr(table.tok_off), ptr(table.tok_at), ptr(table.tok_len),
                    out.shape[1] if values else 0, ptr(out, _f64p) if values else None,
                    ptr(slow, _u8p) if values else None, CACHE_SLOTS if cache is not None else 0,
                    *((ptr(cache.key, _u64p), ptr(cache.hash, _u64p), ptr(cache.tid, _i32p), ptr(cache.len, _i32p),
                       ptr(cache.bytes, _u8p), ptr(cache.tok_at, _i32p), ptr(cache.tok_len, _i32p))
                      if cache is not None else (None,) * 7), len(table.templates))
    return (hashes, tid, out, slow.view(bool)) if values else (hashes, tid)


def _blob(items: list[bytes]):
    """`items` end to end, and where each starts (offsets, one more than items)."""
    import numpy as np

    return b"".join(items) or b"\0", np.concatenate([[0], np.cumsum([len(x) for x in items])]).astype(np.int64)


class Literals:
    """Literals to look for in lines (scan.c: has_literal): those of four bytes or more by their
    first four (sorted, and Wu-Manber's skips over two-byte blocks), the shorter ones with memchr."""

    def __init__(self, literals: list[bytes]) -> None:
        import numpy as np

        lits = sorted({x for x in literals if x})
        self.blob, self.off = _blob(lits)
        self.digits = any(48 <= c <= 57 for x in lits for c in x)  # a literal holds a digit
        long = sorted((int.from_bytes(x[:4], sys.byteorder), k) for k, x in enumerate(lits) if len(x) >= 4)
        self.pre = np.array([w for w, _ in long] or [0], dtype=np.uint32)
        self.pre_lit = np.array([k for _, k in long] or [0], dtype=np.int32)
        # a window of four bytes moves on by the skip of its last two (3 when they end no prefix's
        # first two, three or four bytes)
        self.shift = np.full(1 << 16, 3, dtype=np.uint8)
        for _, k in long:
            x = lits[k]
            for end in (2, 3, 4):
                block = x[end - 2] | (x[end - 1] << 8)
                self.shift[block] = min(int(self.shift[block]), 4 - end)
        short = [k for k, x in enumerate(lits) if len(x) < 4]
        self.short = np.array(short or [0], dtype=np.int32)
        self.args = (self.blob, ptr(self.off), ptr(self.pre, _u32p), ptr(self.pre_lit, _i32p), len(long),
                     ptr(self.shift, _u8p), ptr(self.short, _i32p), len(short))


class OlmoKeys:
    """What pdx_olmo looks for: the body-line keys it tells apart ((key, field code, is a prefix)
    each) and the literals whose presence in a body line it reports."""

    def __init__(self, keys: list[tuple[str, int, bool]], literals: list[bytes]) -> None:
        import numpy as np

        self.blob, self.off = _blob([k.encode("utf-8") for k, _, _ in keys])
        self.code = np.array([c for _, c, _ in keys] or [0], dtype=np.int8)
        self.prefix = np.array([p for _, _, p in keys] or [False], dtype=np.uint8)
        self.n = len(keys)
        self.literals = Literals(literals)


def olmo(kern: Kernels, address: int, starts, ends, idx, keys: OlmoKeys):
    """(kind, step, epoch, hash, field, val, vok, lit) of lines `idx` of a block (see scan.c: pdx_olmo)."""
    import numpy as np

    n = int(idx.size)
    kind = np.empty(n, dtype=np.uint8)
    step = np.zeros(n, dtype=np.int64)
    epoch = np.zeros(n)
    hashes = np.zeros(n, dtype=np.uint64)
    field = np.empty(n, dtype=np.int8)
    val = np.zeros(n)
    vok = np.empty(n, dtype=np.uint8)
    lit = np.empty(n, dtype=np.uint8)
    if n:
        idx = np.ascontiguousarray(idx, dtype=np.int64)
        kern.olmo(address, ptr(starts), ptr(ends), ptr(idx), n, keys.blob, ptr(keys.off), ptr(keys.code, _i8p),
                  ptr(keys.prefix, _u8p), keys.n, *keys.literals.args, ptr(kind, _u8p), ptr(step), ptr(epoch, _f64p),
                  ptr(hashes, _u64p), ptr(field, _i8p), ptr(val, _f64p), ptr(vok, _u8p), ptr(lit, _u8p))
    return kind, step, epoch, hashes, field, val, vok.view(bool), lit.view(bool)


def wrapped(kern: Kernels, address: int, size: int, starts, ends, done, maxwrap: int, header: Literals,
            rest: Literals):
    """(first lines, last lines, joined texts: bytes, a line each) of the hard-wrapped Megatron
    records among the lines of a block not `done` (see scan.c: pdx_wrapped; what it looks at in
    a line is worked out once per line key unless a literal holds a digit)."""
    import numpy as np

    n = int(ends.size)
    first = np.empty(n // 2 + 1, dtype=np.int64)
    last = np.empty(n // 2 + 1, dtype=np.int64)
    out = np.empty(size + 1, dtype=np.uint8)
    used = ctypes.c_int64(0)
    done = np.ascontiguousarray(done, dtype=np.uint8)
    k = int(kern.wrapped(address, ptr(starts), ptr(ends), n, ptr(done, _u8p), maxwrap, *header.args, *rest.args,
                         int(not (header.digits or rest.digits)),
                         ptr(first), ptr(last), ptr(out, _u8p), ctypes.byref(used)))
    return first[:k], last[:k], out[:used.value].tobytes()


def nanotron(kern: Kernels, address: int, starts, ends, done, others: Literals):
    """(lines, steps, values: lm_loss / lr / grad_norm a row each, printed: the same) of the
    nanotron iteration lines among the lines of a block not `done` that are read in columns (see
    scan.c: pdx_nanotron; `others`: the literals of every other parser)."""
    import numpy as np

    n = int(ends.size)
    idx = np.empty(n, dtype=np.int64)
    step = np.empty(n, dtype=np.float64)
    val = np.empty((n, 3), dtype=np.float64)
    has = np.empty((n, 3), dtype=np.uint8)
    done = np.ascontiguousarray(done, dtype=np.uint8)
    k = int(kern.nanotron(address, ptr(starts), ptr(ends), n, ptr(done, _u8p), *others.args, int(not others.digits),
                          ptr(idx), ptr(step, _f64p), ptr(val, _f64p), ptr(has, _u8p)))
    return idx[:k], step[:k], val[:k], has[:k].view(bool)


FOLDED = ("count", "loss_sum", "loss_n", "loss_min", "loss_max", "loss_bad", "nan_w", "skipped_sum", "skipped_n",
          "gn_sum", "gn_n", "gn_max", "gn_bad", "lr", "loss_scale")  # scan.c's pdx_fold order


def fold(kern: Kernels, steps, loss, cols: dict, k: int) -> dict:
    """series.Windows.append's windows of `k` points, in one pass (scan.c: pdx_fold): the same
    values, sums in numpy's order."""
    import numpy as np

    n = int(steps.size)
    nw = (n + k - 1) // k
    first = np.empty(nw, dtype=np.int64)
    last = np.empty(nw, dtype=np.int64)
    out = np.empty((len(FOLDED), nw))
    tmp = np.empty(4 * k)
    arrs = [np.ascontiguousarray(a, dtype=np.float64) for a in
            (loss, cols["grad_norm"], cols["skipped"], cols["loss_bad"], cols["gn_bad"], cols["nan_iters"],
             cols["lr"], cols["loss_scale"])]
    steps = np.ascontiguousarray(steps, dtype=np.int64)
    kern.fold(n, k, ptr(steps), *(ptr(a, _f64p) for a in arrs), ptr(first), ptr(last), ptr(out, _f64p),
              ptr(tmp, _f64p))
    got = dict(zip(FOLDED, out))
    got["first_step"], got["last_step"] = first, last
    return got

