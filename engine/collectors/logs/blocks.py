"""The block reader: the logs collector's fast path (issue 17). Same result as the per-line
reader (`reader.iter_log` fed to a `SeriesBuilder`), at a fraction of the cost on big logs.

The file is read in the per-line reader's blocks (same cuts, same over-long-line handling, same
decoding), and each block is looked at as bytes, with numpy and pyarrow, never as one Python
object per line:

- Megatron-family iteration lines (`... iteration N/ T | key: value | ... |`) are matched against
  line layouts (`_Layout`: the bytes around the values, with digits of timestamps and counters as
  wildcards) learnt from the first line of each layout; the lines that match are read in
  columns: numbers cast in bulk, records handed to the builder as `Rows`. The layout is accepted
  only when no literal that could make another parser act (claim the line, emit an event, change
  state) can occur in a matching line outside its values, and a value that is not a plain number
  is read (and looked at) the per-line way.
- Every other line is looked up by its shape (shapes.py: lines that differ only in their
  numbers) among the shapes learnt so far in the file (first in scan.c's cache of lines by their
  bytes but for digits); a line of a learnt shape is read from its numbers (records in columns,
  events as objects, the parsers' state carried forward for a progress counter), and so is a run
  of such lines, in bulk.
- The rest goes to the per-line parsers (`Dispatcher`) only when it holds one of the literals
  some parser needs (`LineParser.triggers`, found with one RE2 scan over those lines); lines
  holding none cannot yield anything and are skipped. A parser assembling a multi-line record
  sees every line until it is done, as before; but OLMo's records (records.py) and Megatron
  records hard-wrapped over several lines (`_wrapped`: joined on the scan thread as the parser
  joins them, then read like any iteration line) are read in bulk where no other parser acts on
  their lines. The second time a shape reaches the parsers, it
  is learnt (the first blocks are small, so that what they teach serves the rest; a shape learnt
  mid-block with many lines left in the block has those looked up again).
- Records and events reach the builder in line order (`SeriesBuilder.queue` / `add(at=)`).

Megatron lines are read in columns in every file the block reader reads (PER_LINE_BELOW bytes or
more): pyarrow's first cast sets up its kernels (some 50 ms), which a log of a megabyte already
repays (Megatron lines by shape would be learnt anew for every pattern of zeros of their
timestamps, as their records depend on which numbers are zero). Falls back to the per-line
reader when a parser may act on any line (a declared format whose regex requires no literal and
has no `contains`), or when pyarrow is missing.
"""
from __future__ import annotations

import bisect
import functools
import itertools
import os
import re
import threading
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from precdx.collectors.logs.formats import DIGIT_BLIND, builtin_parsers
from precdx.collectors.logs.formats.base import LineParser
from precdx.collectors.logs.formats.megatron import _AFTER_LOSSES, _MAX_WRAP, HEADER, MegatronParser
from precdx.collectors.logs.formats.minor import NanotronParser
from precdx.collectors.logs.model import Event, Record, Rows, parse_num
from precdx.collectors.logs import native
from precdx.collectors.logs.shapes import (Shapes, fingerprint, leaves, make_items, next_state, numeric,
                                           pattern, restore, rows_of, shape_safe, unflatten)
from precdx.collectors.logs.reader import (MAX_LINE, Dispatcher, ReadStats, iter_log, line_text, open_log,
                                           trigger_literals)
from precdx.collectors.logs.records import Chains, OlmoRecords

pa = pc = None  # pyarrow and pyarrow.compute, imported by _arrow() for the first log that needs them


def _arrow() -> bool:
    """Import pyarrow on first need (a call that reads only small logs never pays for it):
    False when it is missing (a core dependency; the per-line reader still works then)."""
    global pa, pc
    if pc is None:
        try:
            import pyarrow
            import pyarrow.compute
        except ImportError:  # pragma: no cover
            return False
        pa, pc = pyarrow, pyarrow.compute
    return True

BLOCK = 1 << 22            # bytes read at a time (the per-line reader's block: same cuts)
PER_LINE_BELOW = 1 << 20   # smaller files are read by the per-line reader (no pyarrow to load)
RAMP = 1 << 16             # the first block's size while line shapes are learnt
RELOOK = 64                # lines of a shape learnt mid-block that make looking them up again pay
FIRST_BLOCKS = 2           # blocks of a file looked at for nanotron lines in columns and hard-wrapped
                           # Megatron records before a record of the framework is seen
FEW = 16                   # dynamic lines of a run applied one at a time below this many
MAX_LAYOUTS = 64           # line layouts remembered per file
MAX_TRIES = 32             # lines a block tries to learn a layout from (the rest go per line)
THREADS: int | None = None  # scan threads (None: from the CPU count, see _threads)
_ITER = b"iteration"
# Megatron keys read into columns: normalised key -> Rows field / tracked extra.
_FIELDS = {"lm loss": "loss", "learning rate": "lr", "loss scale": "loss_scale", "grad norm": "grad_norm",
           "number of skipped iterations": "skipped", "number of nan iterations": "nan_iters",
           "global batch size": "global_batch_size", "consumed samples": "consumed_samples",
           "consumed tokens": "consumed_tokens"}
_VALUE_CHARS = set(b" 0123456789+-.eE")  # what a finite value the bulk cast takes (and its padding) holds
_POW10F = 10.0 ** np.arange(1, 17)  # a whole number below 2^53 has 1 + (powers <= it) digits
# What the Megatron parser reads when not mid-record: an iteration header or a validation line
# (the byte patterns of `HEADER` / `VALIDATION`, widened so that every line Python's Unicode \s
# and \d match is found: any non-ASCII byte counts as both).
_S = r"(?:[\t-\r\x1c-\x1f ]|[\x80-\xff])"
_D = r"(?:[0-9]|[\x80-\xff])"
_MEGATRON_LINE = f"iteration{_S}+{_D}+{_S}*/{_S}*{_D}+{_S}*\\||validation loss at iteration"
_STRICT_NUM = r"^[+-]?(?:[0-9]+\.?[0-9]*(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?)$"


def read_into(path: Path, stats: ReadStats, builder, parsers: list[LineParser] | None = None,
              block: int = BLOCK, columns: bool | None = None) -> None:
    """Feed the records and events of one log file to `builder` (a SeriesBuilder), as
    `for item in iter_log(path, stats, parsers): builder.add(item)` would. `columns`: read
    Megatron iteration lines in columns (default: in every file the block reader reads; smaller
    ones go line by line). Raises OSError if the file cannot be opened."""
    parsers = parsers if parsers is not None else builtin_parsers()
    small = False
    if columns is None:
        small = os.path.getsize(path) < PER_LINE_BELOW
        columns = not small
    plan = None if small else _Plan.of(parsers, columns)
    if plan is None:
        for item in iter_log(path, stats, parsers):
            builder.add(item)
        return
    with open_log(path, stats) as fh:
        if fh is not None:
            _Reader(plan, stats, builder).run(fh, block)


def _threads() -> int:
    """Scan threads: THREADS when set, else up to 2 (the CPU count permitting); more add
    little, the parsers' state being fed on one thread."""
    return max(1, THREADS) if THREADS else max(1, min(2, os.cpu_count() or 1))


def _result(task):
    return task.result() if isinstance(task, Future) else task


@dataclass
class _Scan:
    body: bytes
    starts: np.ndarray     # line starts (block offsets)
    nl: np.ndarray         # line ends (the newline)
    rows: "Rows | None"    # Megatron rows read in columns (line = index in the block)
    row_idx: np.ndarray
    fast: np.ndarray       # per line: read in columns
    residual: np.ndarray   # other lines holding a trigger (or of a shape read per line)
    rhash: np.ndarray      # per residual line: its shape hash when the shape is new, else 0
    tl: np.ndarray | None = None  # lines of learnt shapes (shapes.py), in order,
    tt: np.ndarray | None = None  # their shapes,
    tv: np.ndarray | None = None  # and their tokens' values (a row per line)
    table: object = None          # the shapes.Table they were looked up in
    address: int = 0              # where the block's bytes are (for the kernels)
    silent: np.ndarray | None = None       # lines of new shapes holding no trigger,
    silent_hash: np.ndarray | None = None  # and their shape hashes
    # (tl, which of them are records in columns, those records by framework: _grouped) worked
    # out on the scan thread when no line of the block is a step-less record (whether those go in
    # columns depends on the builder); used while tl is the one it was worked out for
    grouped: tuple | None = None
    keyed: tuple | None = None  # (tt, _keys of tt): the same
    chains: "Chains | None" = None  # OLMo records that may be read in bulk (records.py)
    # hard-wrapped Megatron records read in columns: (rows, their first lines, all their lines)
    wrapped: tuple | None = None
    nanotron: tuple | None = None  # nanotron iteration lines read in columns: (rows, their lines)


def _escape(literal: bytes) -> str:
    """An RE2 pattern (binary, Latin-1 mode: one byte per character) matching `literal`."""
    out = []
    for b in literal:
        c = chr(b)
        out.append(c if c.isalnum() and b < 128 else f"\\x{b:02x}")
    return "".join(out)


class _Plan:
    """What the block reader needs to know about the parsers of one file."""

    def __init__(self, parsers: list[LineParser], triggers: list[bytes], megatron: MegatronParser | None,
                 columns: bool, relevant: list[bytes]) -> None:
        self.dispatcher = Dispatcher(parsers)
        alternatives = [_escape(t) for t in sorted(set(triggers))]
        if megatron is not None:
            alternatives.append(_MEGATRON_LINE)
        self.any_trigger = "|".join(alternatives)
        self.megatron = megatron if columns else None  # read its iteration lines in columns
        self.columns = columns  # (and nanotron's)
        self.relevant = relevant                      # literals that matter on a Megatron line
        self.relevant_text = [t.decode("utf-8") for t in relevant]
        # learn line shapes (shapes.py): every parser digit-blind, every literal it looks for the
        # same in all lines of a shape
        self.shapes = all(type(p) in DIGIT_BLIND and all(shape_safe(t) for t in (*p.hints, *(p.triggers or ())))
                          for p in parsers)

    @classmethod
    def of(cls, parsers: list[LineParser], columns: bool = True) -> "_Plan | None":
        if not _arrow():
            return None
        triggers: list[bytes] = []
        for p in parsers:
            t = p.triggers
            if t is None:
                return None  # that parser may act on any line: read every line
            triggers.extend(x.encode("utf-8") for x in t if x)
        if any(b"\xef\xbf\xbd" in t for t in triggers):  # U+FFFD: also what undecodable bytes read as
            return None
        triggers = [t for t in triggers if b"\n" not in t]  # never inside one line
        megatron = next((p for p in parsers if isinstance(p, MegatronParser)), None)
        if megatron is not None:  # its hint is common in prose: look for its lines themselves
            triggers = [t for t in triggers if t not in {h.encode() for h in megatron.hints}
                        or any(t in {h.encode() for h in (p.triggers or ())} for p in parsers if p is not megatron)]
        relevant: list[bytes] = []
        if megatron is not None:
            at = parsers.index(megatron)
            for i, p in enumerate(parsers):
                # A parser before Megatron's may claim the line; one after it only matters when it
                # emits events or keeps state (the records of a pure one are dropped there).
                if i == at or p.fallback or (i > at and p.pure):
                    continue
                relevant.extend(x.encode("utf-8") for x in (p.triggers or ()) if x)
        return cls(parsers, triggers, megatron, columns, sorted(set(relevant)))


class _Reader:
    def __init__(self, plan: _Plan, stats: ReadStats, builder) -> None:
        self.plan = plan
        self.stats = stats
        self.builder = builder
        self.disp = plan.dispatcher
        self.lineno = 0  # lines before the current block
        self.layouts: list[_Layout] = []  # most recently used first; shared by the scan threads
        self.lock = threading.Lock()
        self._tls = threading.local()
        # the compiled kernels (native/scan.c) when they can be had, else numpy does the same work
        # (and no line shapes are learnt)
        self.kern = native.kernels() if plan.megatron is not None or plan.shapes else None
        self.shapes = Shapes(self.disp, self.kern) if plan.shapes and self.kern is not None else None
        # the parsers' state while shapes are learnt (None while a multi-line record is pending:
        # only looked at between records)
        self.state: tuple | None = fingerprint(self.disp.parsers)
        self.stateful = [p for p in self.disp.parsers if not (p.pure or p.stateless)]  # (its parsers)
        # OLMo records read in bulk (records.py), where shapes are learnt
        self.olmo = None if self.shapes is None else OlmoRecords.of(self.disp, self.kern)
        # a block's step-less records of dynamic shapes met a few at a time (_batch), put in
        # columns at its end: per run, (their shapes, lines, tokens, {state value: values read})
        self.deferred: list[tuple] = []
        self.deferred_shapes: dict[int, object] = {}  # (their templates by number)
        # What no line of a hard-wrapped Megatron record may hold (_wrapped): its header, any other
        # parser's literal; the lines after it (which the Megatron parser swallows), those of the
        # parsers that are not fallback ones.
        self.wrap_literals = None
        if plan.megatron is not None and self.kern is not None:
            others = [p for p in self.disp.parsers if not isinstance(p, MegatronParser)]
            self.wrap_literals = (native.Literals(trigger_literals(others)),
                                  native.Literals(trigger_literals(others, fallback=False)))
        # What no nanotron iteration line read in columns may hold (_nanotron): a literal of any
        # parser that would act on it but Megatron's (which sees every line holding `iteration`,
        # and reads nothing in one without its header or validation line: scan.c checks those);
        # fallback parsers do not see a line another parser claims.
        self.nano_literals = None
        if plan.columns and self.kern is not None and any(type(p) is NanotronParser for p in self.disp.parsers):
            others = [p for p in self.disp.parsers if type(p) not in (NanotronParser, MegatronParser)]
            self.nano_literals = native.Literals(trigger_literals(others, fallback=False))
        # nanotron records were seen (or its lines read in columns): later blocks look for its lines
        # in columns; Megatron records were: later blocks look for hard-wrapped ones (as the
        # first FIRST_BLOCKS blocks do both; else such lines go per line, the same records)
        self.nano_on = self.meg_on = False
        self._block_no = itertools.count()

    # -- the per-line reader's cuts ------------------------------------------------------------
    def run(self, fh, block: int) -> None:
        """Cut the file as the per-line reader does; blocks are scanned (numpy/pyarrow, no GIL
        held for most of it) on worker threads while this thread feeds the builder in order."""
        stats = self.stats
        threads = _threads()
        pool = ThreadPoolExecutor(threads, thread_name_prefix="precdx-logs") if threads > 1 else None
        todo: deque = deque()  # scans (futures) and per-line texts, in file order

        def push(task) -> None:
            todo.append(task)
            while len(todo) > threads:
                self._merge(_result(todo.popleft()))

        rest = b""
        skipping = False
        readinto = getattr(fh, "readinto", None)
        # While shapes are learnt, the first blocks are small (64 KiB, then 4x each time): what
        # one block teaches serves the blocks scanned after it is merged.
        size = min(block, RAMP) if self.shapes is not None else block
        try:
            while True:
                # The carried head of a line, then the next chunk read in after it (no copy of
                # the chunk: the block is a bytearray the scan reads in place).
                head = len(rest)
                buf = bytearray(head + size)
                buf[:head] = rest
                if readinto is not None:
                    got = readinto(memoryview(buf)[head:])
                else:
                    chunk = fh.read(size)
                    got = len(chunk)
                    buf[head:head + got] = chunk
                if not got:
                    break
                if got < size:
                    del buf[head + got:]
                size = min(block, size * 4)
                stats.bytes += got
                cut = buf.rfind(b"\n", head)  # (`rest` holds no newline)
                if cut < 0:
                    rest = b"" if skipping else bytes(buf)
                    if len(rest) > MAX_LINE:
                        stats.cut_lines += 1
                        push(("cut", [rest[:MAX_LINE].decode("utf-8", errors="replace")]))
                        rest, skipping = b"", True
                    continue
                rest = bytes(buf[cut + 1:])
                del buf[cut + 1:]
                body = buf
                if skipping:  # the tail of an over-long line ends here
                    body = body[body.find(b"\n") + 1:]
                    skipping = False
                if body:
                    push(pool.submit(self._scan, body) if pool is not None else self._scan(body))
            while todo:
                self._merge(_result(todo.popleft()))
        finally:
            if pool is not None:
                for task in todo:
                    if isinstance(task, Future):
                        task.cancel()
                pool.shutdown(wait=True)
        if rest and not skipping:
            stats.truncated_last_line = True
            self._lines([rest.decode("utf-8", errors="replace").rstrip("\r")])
        for item in self.disp.flush():
            self._count(item)
            self.builder.add(item)
        self.builder.settle()

    def _count(self, item) -> None:
        if isinstance(item, Record):
            fw = self.stats.frameworks
            fw[item.framework] = fw.get(item.framework, 0) + 1

    def _lines(self, texts: list[str]) -> None:
        """Lines through the per-line parsers (texts already cut and stripped as the per-line
        reader does)."""
        feed, add, count = self.disp.feed, self.builder.add, self._count
        for text in texts:
            self.lineno += 1
            self.stats.lines += 1
            for item in feed(text, self.lineno):
                count(item)
                add(item, at=self.lineno)
        if self.shapes is not None:
            self.state = None if self.disp.pending else fingerprint(self.disp.parsers)

    # -- one block of whole lines ----------------------------------------------------------------
    def _scan(self, body: bytes) -> "_Scan | list[str]":
        """What can be known of a block without the parsers' state (runs on a worker thread):
        its lines, the Megatron rows read in columns, the other lines holding a trigger. A
        block with a line to cut comes back as its lines' texts, as the per-line reader reads them."""
        a = np.frombuffer(body, dtype=np.uint8)
        kern = self.kern
        cand = None
        if kern is not None:  # lines, their ends and the Megatron candidates in one compiled pass
            starts, nl, cand, longest = native.lines(kern, body, a.ctypes.data)
            n = int(nl.size)
        else:
            nl = np.flatnonzero(a == 10)
            n = int(nl.size)
            starts = np.empty(n, dtype=np.int64)
            starts[0] = 0
            starts[1:] = nl[:-1] + 1
            longest = int((nl - starts).max())
        if longest > MAX_LINE:
            texts = body[:-1].decode("utf-8", errors="replace").split("\n")
            return texts  # cut in _merge (it counts)
        rows, row_idx = (None, np.zeros(0, dtype=np.int64))
        wrapped = None
        if self.plan.megatron is not None:
            rows, row_idx = self._megatron(body, a, starts, nl, cand)
            if row_idx.size:
                self.meg_on = True  # (a block scanned after this one looks for wrapped records too)
        fast = np.zeros(n, dtype=bool)
        fast[row_idx] = True
        # Hard-wrapped Megatron records, among all the other lines: what pdx_wrapped checks of their
        # lines (no other parser's literal, printable bytes, no second header) is what makes the
        # per-line reader join them, whatever shape the lines have.
        block_no = next(self._block_no)
        if self.wrap_literals is not None and (self.meg_on or block_no < FIRST_BLOCKS):
            wrapped = self._wrapped(body, a, starts, nl, fast)
            if wrapped is not None:
                fast[wrapped[2]] = True
                self.meg_on = True
        nano = None
        if self.nano_literals is not None and (self.nano_on or block_no < FIRST_BLOCKS):
            nano = self._nanotron(a, starts, nl, fast)
            if nano is not None:
                fast[nano[1]] = True
                self.nano_on = True
        if self.shapes is None:
            others = np.flatnonzero(~fast)
            residual = self._with_triggers(body, starts, nl, others)
            return _Scan(body, starts, nl, rows, row_idx, fast, residual, np.zeros(residual.size, dtype=np.uint64),
                         wrapped=wrapped, nanotron=nano)
        others = np.flatnonzero(~fast)
        # Lines of a learnt shape: read from their tokens (or per line, for a shape that must be);
        # the others are looked at for triggers.
        table = self.shapes.table
        address = a.ctypes.data
        hashes, tid, tv, slow = native.shapes(self.kern, address, starts, nl, others, table, values=True,
                                              cache=self._cache(table))
        known = tid >= 0
        reads = np.zeros(others.size, dtype=bool)
        reads[known] = table.reads[tid[known]]
        quiet = np.zeros(others.size, dtype=bool)  # shapes no parser looks at
        quiet[known] = table.quiet[tid[known]]
        chains = None
        if self.olmo is not None:
            # OLMo records read in bulk are looked for among the lines whose shape does not settle
            # them (one read from its tokens, or no parser's concern: never such a line; a record
            # holding one is read per line).
            loose = others[~(known & ((reads & ~slow) | quiet))]
            if loose.size:
                chains = self.olmo.scan(body, address, starts, nl, loose)
            if chains is not None:  # (their lines are read with them, or per line)
                keep = np.ones(n, dtype=bool)
                keep[chains.lines] = False
                keep = keep[others]
                others, hashes, tid, tv, slow = others[keep], hashes[keep], tid[keep], tv[keep], slow[keep]
                known, reads, quiet = known[keep], reads[keep], quiet[keep]
        if reads.all():  # (the usual block of a long run: no copy of its token values)
            tl, tt = others, tid
        else:
            tl, tt, tv, slow = others[reads], tid[reads], tv[reads], slow[reads]
        per_line = np.concatenate([others[known & ~reads & ~quiet], tl[slow]])
        if slow.any():
            tl, tt, tv = tl[~slow], tt[~slow], tv[~slow]
        unknown = ~known
        unk, unk_hash = others[unknown], hashes[unknown]
        new = self._with_triggers(body, starts, nl, unk)
        at = np.searchsorted(unk, new)
        residual = np.concatenate([per_line, new])
        rhash = np.concatenate([np.zeros(per_line.size, dtype=np.uint64), unk_hash[at]])
        order = np.argsort(residual, kind="stable")
        silent = np.ones(unk.size, dtype=bool)
        silent[at] = False
        grouped = keyed = None
        if tl.size:
            keyed = (tt, *_keys(table, tt))
            if not table.hinted[tt].any():
                as_rows = table.as_rows[tt]
                grouped = (tl, as_rows, _grouped(table, tl, tt, tv, as_rows, None))
        return _Scan(body, starts, nl, rows, row_idx, fast, residual[order], rhash[order], tl, tt, tv, table,
                     address, unk[silent], unk_hash[silent], grouped, keyed, chains, wrapped, nano)

    def _merge(self, scan: "_Scan | list[str] | tuple") -> None:
        """Feed one scanned block to the parsers (the lines that need them) and the builder."""
        if isinstance(scan, tuple):  # the head of an over-long line without a newline
            self._lines(scan[1])
            return
        if isinstance(scan, list):
            texts = scan
            for j, t in enumerate(texts):
                if len(t) > MAX_LINE:
                    self.stats.cut_lines += 1
                    t = t[:MAX_LINE]
                texts[j] = t[:-1] if t.endswith("\r") else t
            self._lines(texts)
            return
        body, starts, nl, fast = scan.body, scan.starts, scan.nl, scan.fast
        if self.shapes is not None and scan.table is not self.shapes.table:
            self._relook(scan)
        n = int(nl.size)
        first = self.lineno + 1
        self.stats.lines += n
        # Items of the lines read per line, in order; a parser mid-record sees the following lines
        # too. Lines of learnt shapes are read from their shape while the parsers' state is the
        # one it was learnt in (else per line).
        items: list[tuple[int, object]] = []
        fed: list[int] = []  # lines read per line or applied one at a time
        done: list[np.ndarray] = []  # lines applied in bulk (_batch)
        disp, feed, shapes = self.disp, self.disp.feed, self.shapes
        res = rhash = tl = tkey = tmask = dyn_at = None
        ntl = 0

        def lists() -> None:
            # (the lines of learnt shapes stay arrays: the loop below visits few of them, the
            # others are read in bulk)
            nonlocal res, rhash, tl, tkey, tmask, dyn_at, ntl
            res, rhash = scan.residual.tolist(), scan.rhash.tolist()
            tl = scan.tl if scan.tl is not None else np.zeros(0, dtype=np.int64)
            ntl = int(tl.size)
            if ntl:  # (worked out on the scan thread unless lines were looked up again since)
                keyed = scan.keyed
                tkey, tmask, dyn_at = keyed[1:] if keyed is not None and keyed[0] is scan.tt \
                    else _keys(scan.table, scan.tt)

        lists()
        # A new shape learnt here with many lines left in the block: those are looked up again
        # at once (that costs a pass over the block's remaining lines).
        rh_arr, res_arr = scan.rhash, scan.residual
        learnt: set[int] = set()  # such shapes learnt in this block

        def worth(h: int, i: int) -> bool:
            """Whether enough lines of shape `h` are left in the block after line `i` to look
            them up again (a pass over the lines left, against ~15 us a line read per line)."""
            left = int(np.count_nonzero(res_arr[rh_arr == np.uint64(h)] > i))
            return left >= max(RELOOK, (len(res) - pos) // 256)

        def per_line(i: int, h: int = 0) -> None:
            raw = body[int(starts[i]):int(nl[i])]
            text = line_text(raw)
            fed.append(i)
            learn = h and shapes is not None and not disp.pending and shapes.should_learn(h)
            got = feed(text, first + i)
            for item in got:
                items.append((first + i, item))
            if shapes is not None:
                # The state is only looked at between records: not worked out while one is pending.
                before = self.state
                if disp.pending:
                    self.state = None
                else:
                    now = fingerprint(disp.parsers)
                    if now != before:
                        self.state = now
                if learn:
                    shapes.learn(disp, bytes(raw), text, first + i, got, before,
                                 self.state if self.state is not None else fingerprint(disp.parsers), h)
                    if shapes.templates[-1].reads and worth(h, i):
                        learnt.add(h)

        columns: dict[str, list[Rows]] = {}  # records in columns, per framework
        chains, olmo = scan.chains, self.olmo
        heads = chains.head.tolist() if chains is not None else []
        head_set = set(heads)

        def enter(i: int) -> int:
            """Line i, a header of an OLMo chain: its records from there read in bulk when the
            parsers allow it (records.py); returns the last line read so, else -1 (per line)."""
            if disp.pending and olmo.others_pending():
                return -1
            k = bisect.bisect_left(heads, i)
            j = olmo.inert_upto(chains, k, body, starts, nl, first)
            if j == k:
                return -1
            parser = olmo.parser
            if parser.pending:  # the record it holds ends at this header
                for item in parser.close():
                    items.append((first + i, item))
            if j - 1 > k:
                part = chains.rows.part(slice(k, j - 1))
                part.line = part.line + first
                columns.setdefault("olmo", []).append(part)
            parser.hold(chains.record(j - 1, first))
            self.state = None
            end = int(chains.end[k])
            if j < len(heads) and int(chains.end[j]) == end:  # a header the others act on: per line from it
                return heads[j] - 1
            return end

        pos = tpos = 0
        i = -1
        while True:
            if learnt:  # a shape learnt that later lines of the block have: those read from it
                shapes.publish()
                self._relook(scan, after=i, only=set(learnt))
                learnt.clear()
                lists()
                pos, tpos = bisect.bisect_right(res, i), int(np.searchsorted(tl, i, side="right"))
            if disp.pending:
                i += 1
                if i >= n:
                    break
                if i in head_set:
                    e = enter(i)
                    if e >= 0:
                        i = e
                        continue
                per_line(i)
                continue
            while pos < len(res) and res[pos] <= i:
                pos += 1
            r = res[pos] if pos < len(res) else n
            c = n  # the next chain's header, when before r
            if heads:
                hk = bisect.bisect_right(heads, i)
                if hk < len(heads) and heads[hk] < r:
                    c = r = heads[hk]
            if ntl:  # lines of learnt shapes before r: read from their shapes while the state allows
                if tpos < ntl and tl[tpos] <= i:
                    tpos = int(np.searchsorted(tl, i, side="right"))
                hi = int(np.searchsorted(tl, r, side="left"))
                fp, bad = self.state, -1
                if hi - tpos > 16:
                    masks = tmask[tpos:hi]
                    seen = np.bincount(masks)
                    now = np.zeros(seen.size, dtype=np.int64)
                    for m in np.flatnonzero(seen).tolist():
                        now[m] = shapes.pattern_now(m, fp)
                    off = np.flatnonzero(tkey[tpos:hi] != now[masks])
                    bad = tpos + int(off[0]) if off.size else -1
                else:
                    pattern_now = shapes.pattern_now
                    for k, key, m in zip(range(tpos, hi), tkey[tpos:hi].tolist(), tmask[tpos:hi].tolist()):
                        if key != pattern_now(m, fp):
                            bad = k
                            break
                valid = hi if bad < 0 else bad  # lines tl[tpos:valid] hold under the state's pattern
                d = int(np.searchsorted(dyn_at, tpos))
                if d < dyn_at.size and dyn_at[d] < valid:  # dynamic ones among them: applied in bulk
                    stop = self._batch(scan, tpos, valid, first, items, columns, fed, done)
                    if stop < valid:
                        if stop == tpos:  # its first line could not be applied with the others: alone
                            i = int(tl[stop])
                            if not self._dynamic(scan, stop, first, items, fed):
                                per_line(i)
                        else:  # the state's pattern moved: look at the lines from `stop` again
                            i = int(tl[stop - 1])
                        continue
                if bad >= 0:  # a line of a shape learnt under another pattern of the state: per line
                    i = int(tl[bad])
                    per_line(i)
                    continue
                tpos = hi
            if r >= n:
                break
            i = r
            if r == c:
                e = enter(i)
                if e >= 0:
                    i = e
                else:
                    per_line(i)
                continue
            per_line(i, rhash[pos])
        self.lineno += n
        fed_at = None  # per line of the block: it was read per line or applied as a transition
        if fed or done:
            fed_at = np.zeros(n, dtype=bool)
            fed_at[fed] = True
            for d in done:
                fed_at[d] = True
        # Records read in columns on the scan thread (Megatron's, hard-wrapped ones by their first
        # lines, nanotron's), but those of lines that went per line (a record whose first line
        # did went per line whole).
        read = [(scan.rows, scan.row_idx)] + [x[:2] for x in (scan.wrapped, scan.nanotron) if x is not None]
        for rows, at in read:
            if rows is None or not len(rows):
                continue
            if fed_at is not None:
                rows = rows.part(~fed_at[at])
            if len(rows):
                rows.line = rows.line + first
                columns.setdefault(rows.framework, []).append(rows)
        if ntl:
            self._shaped(scan, fed_at, first, columns, items)
        if self.deferred:
            self._deferred_rows(first, columns)
        for fw, parts in columns.items():
            rows = parts[0] if len(parts) == 1 else Rows.concat(parts)
            self.stats.frameworks[fw] = self.stats.frameworks.get(fw, 0) + len(rows)
            self.stats.columnar += len(rows)
            self.builder.queue(rows)
        items.sort(key=lambda x: x[0])  # (lines read in bulk add theirs out of order; stable)
        add, count = self.builder.add, self._count
        for at, item in items:
            count(item)
            add(item, at=at)
        self.builder.settle()
        if not self.nano_on and "nanotron" in self.stats.frameworks:
            self.nano_on = True
        if not self.meg_on and "megatron" in self.stats.frameworks:
            self.meg_on = True
        if shapes is not None:
            if scan.silent is not None and scan.silent.size:
                sl, sh = scan.silent, scan.silent_hash
                if fed_at is not None:  # (a line fed while a parser was mid-record tells nothing of its shape then)
                    keep = ~fed_at[sl]
                    sl, sh = sl[keep], sh[keep]
                lines, hashes = shapes.silent(sh, sl)
                for i, h in zip(lines.tolist(), hashes.tolist()):
                    shapes.quiet(body[int(starts[i]):int(nl[i])], h)
            shapes.publish()

    def _batch(self, scan: _Scan, k0: int, k1: int, first: int, items: list, columns: dict, fed: list,
               done: list) -> int:
        """Lines tl[k0:k1] of learnt shapes, all holding under the pattern of the current state,
        some dynamic: the state after each transition (a line that sets state values from its
        numbers) is carried forward in bulk, the dynamic lines' items made from it (records in
        columns once their framework numbers step-less records), and the parsers left in the
        state after the last one. Stops before the first transition that would change the
        state's pattern (a counter appearing, a number turning zero), returned (else k1); the
        dynamic lines before it are done (added to `fed` one by one, or to `done` as an array), the
        others left to `_shaped`."""
        table = scan.table
        tt = scan.tt[k0:k1]
        dyn = np.flatnonzero(table.dynamic[tt])
        if dyn.size <= FEW:  # a few: one at a time (the bulk set-up costs more)
            for d in dyn.tolist():
                k = k0 + d
                was = pattern(self.state)
                if not self._dynamic(scan, k, first, items, fed):
                    return k
                if pattern(self.state) != was:
                    return k + 1  # the state's pattern moved: the lines after it are looked at again
            return k1
        tv = scan.tv[k0:k1]
        m = k1 - k0
        fp = self.state
        flat0 = leaves(fp)
        trans = dyn[table.transition[tt[dyn]]]
        stop = m
        # What each transition sets: per state value j, the lines setting it and the values.
        setters: dict[int, list] = {}
        for t, at in _by_shape(tt[trans], trans):
            for j, how in table.templates[t].sets:
                if how[0] == "tok":
                    v, whole = tv[at, how[1]], how[2]
                elif how[0] == "const" and numeric(how[1]):
                    v, whole = np.full(at.size, float(how[1])), type(how[1]) is int
                else:  # (a value set to None, or copied from another: one line at a time)
                    stop = min(stop, int(at[0]))
                    continue
                setters.setdefault(j, []).append((at, v, whole))
        for j, parts in list(setters.items()):
            at = np.concatenate([a for a, _, _ in parts])
            order = np.argsort(at, kind="stable")
            at, v = at[order], np.concatenate([x for _, x, _ in parts])[order]
            whole = all(w for _, _, w in parts)
            cur = flat0[j]
            if numeric(cur):  # the pattern holds while the sign and zero-ness do
                moved = np.flatnonzero(np.sign(v) != np.sign(cur))
            else:
                moved = np.arange(at.size)
            if moved.size:
                stop = min(stop, int(at[moved[0]]))
            setters[j] = (at, v, whole)
        if stop == 0:
            return k0
        dyn = dyn[dyn < stop]

        def state_at(q: np.ndarray, j: int) -> np.ndarray:
            """State value j before lines q (relative), as float (NaN: None)."""
            got = setters.get(j)
            cur = flat0[j]
            base = float(cur) if numeric(cur) else np.nan
            if got is None:
                return np.full(q.size, base)
            at, v, _ = got
            k = np.searchsorted(at, q, side="left") - 1
            return np.where(k >= 0, v[np.maximum(k, 0)], base)

        with_items = dyn[table.has_items[tt[dyn]]]
        in_rows = 0  # lines whose records go in columns (counted with those)
        few_rows: list[tuple] = []  # (shape, its template, lines q): in columns at the block's end

        for t, q in _by_shape(tt[with_items], with_items):
            tpl = table.templates[t]
            reads = tpl.state_reads
            if reads is None:
                reads = tpl.state_reads = tuple(sorted({how[1] for _, attrs, extra in tpl.items
                                                        for how in (*attrs.values(), *extra.values())
                                                        if how[0] == "state"}))
            few = q.size < FEW
            if few and _rows_ok(tpl, self.builder):  # in columns with the block's others of its shape
                few_rows.append((t, tpl, q))
                in_rows += int(q.size)
                continue
            lines = scan.tl[k0 + q]
            made = _dynamic_rows(tpl, first + lines, tv[q], state_at, q, self.builder) if not few else None
            if made is not None:
                columns.setdefault(tpl.framework, []).append(made)
                in_rows += int(q.size)
                continue
            if self.builder.counts_only():  # events only counted from now on: those of fixed kinds, by shape
                kinds = _event_kinds(tpl)
                if kinds is not None:
                    for kind in kinds:
                        self.builder.count_event(kind, int(q.size))
                    continue
            cols = {j: state_at(q, j).tolist() for j in reads}
            for r, (qi, i) in enumerate(zip(q.tolist(), lines.tolist())):
                flat = list(flat0)
                for j in reads:
                    v = cols[j][r]
                    flat[j] = None if v != v else int(v) if type(flat0[j]) is int or flat0[j] is None else float(v)
                text = line_text(scan.body[int(scan.starts[i]):int(scan.nl[i])]) if tpl.slices else None
                for item in make_items(tpl, first + i, tv[qi], text, flat):
                    items.append((first + i, item))
        if few_rows:  # their lines, tokens and the state values they read, for all of them at once
            qs = np.concatenate([q for _, _, q in few_rows])
            for t, tpl, _ in few_rows:
                self.deferred_shapes[t] = tpl
            reads = sorted({j for _, tpl, _ in few_rows for j in tpl.state_reads})
            self.deferred.append((np.repeat([t for t, _, _ in few_rows], [q.size for _, _, q in few_rows]),
                                  scan.tl[k0 + qs], tv[qs], {j: state_at(qs, j) for j in reads}))
        if setters:
            last = list(flat0)
            for j, (at, v, whole) in setters.items():
                k = int(np.searchsorted(at, stop, side="left")) - 1
                if k >= 0:
                    last[j] = int(v[k]) if whole else float(v[k])
            restore(self.stateful, unflatten(fp, last))
            self.state = fingerprint(self.disp.parsers)
        done.append(scan.tl[k0 + dyn])
        self.stats.columnar += int(dyn.size) - in_rows
        return k0 + stop

    def _deferred_rows(self, first: int, columns: dict) -> None:
        """The records `_batch` met a few at a time, in columns by shape (`deferred`, emptied)."""
        parts = self.deferred
        shape = np.concatenate([p[0] for p in parts])
        lines = np.concatenate([p[1] for p in parts])
        width = max(p[2].shape[1] for p in parts)  # (a shape learnt mid-block may widen the tokens)
        tv = np.vstack([p[2] if p[2].shape[1] == width else
                        np.hstack([p[2], np.full((p[2].shape[0], width - p[2].shape[1]), np.nan)]) for p in parts])
        state = {j: np.concatenate([p[3][j] if j in p[3] else np.full(p[0].size, np.nan) for p in parts])
                 for j in sorted({j for p in parts for j in p[3]})}
        for t, at in _by_shape(shape, np.arange(shape.size)):
            tpl = self.deferred_shapes[t]
            made = _dynamic_rows(tpl, first + lines[at], tv[at], lambda q, j: state[j][at], at, self.builder)
            columns.setdefault(tpl.framework, []).append(made)
        self.deferred.clear()
        self.deferred_shapes.clear()

    def _dynamic(self, scan: _Scan, k: int, first: int, items: list, fed: list) -> bool:
        """Line `scan.tl[k]`, of a dynamic shape (it moves the parsers' state or its items read it):
        its items, and the state after it, when the state's pattern is the one the shape was learnt
        in (the line is then done: added to `fed`); else False (it goes per line)."""
        tpl = scan.table.templates[int(scan.tt[k])]
        fp = self.state
        if self.shapes.pattern_now(tpl.mask, fp) != tpl.state:
            return False
        i = int(scan.tl[k])
        row = scan.tv[k]
        flat = leaves(fp)
        text = line_text(scan.body[int(scan.starts[i]):int(scan.nl[i])]) if tpl.slices else None
        for item in make_items(tpl, first + i, row, text, flat):
            items.append((first + i, item))
        if tpl.sets:
            restore(self.stateful, unflatten(fp, next_state(tpl, row, flat)))
            self.state = fingerprint(self.disp.parsers)
        fed.append(i)
        self.stats.columnar += 1
        return True

    def _cache(self, table) -> native.Cache:
        """scan.c's lines' cache of this thread for `table` (one per thread: the scan threads
        and the merging one)."""
        cache = getattr(self._tls, "cache", None)
        if cache is not None and cache.table is not table:
            old = cache.table.templates
            # A table of more shapes than the cache's (shapes are only ever added, each keeps its
            # number) tells every line the cache holds what the cache says: the cache stays, but
            # for tokens laid out at another width.
            if (len(table.templates) >= len(old) > 0 and table.templates[len(old) - 1] is old[-1]
                    and table.width == cache.table.width):
                cache.table = table
            else:
                cache = None
        if cache is None:
            cache = self._tls.cache = native.Cache(table)
        return cache

    def _relook(self, scan: _Scan, after: int = -1, only: set | None = None) -> None:
        """Shapes learnt since the block was scanned: its lines (past line `after` of the block)
        of a shape that was new then are looked up again (the first blocks are scanned before
        anything is learnt, and a shape learnt while a block is merged may have later lines in it)."""
        table = self.shapes.table
        rh = scan.rhash
        new = np.flatnonzero(rh)
        if after >= 0:
            new = new[scan.residual[new] > after]
        if only is not None:
            new = new[np.isin(rh[new], np.array(sorted(only), dtype=np.uint64))]
        scan.table = table
        width = max(1, table.width)
        if scan.tv is not None and scan.tv.shape[1] < width:
            pad = np.full((scan.tv.shape[0], width - scan.tv.shape[1]), np.nan)
            scan.tv = np.hstack([scan.tv, pad])
        if new.size == 0:
            return
        idx = scan.residual[new]
        _, tid, tv, slow = native.shapes(self.kern, scan.address, scan.starts, scan.nl, idx, table, values=True,
                                         cache=self._cache(table))
        known = tid >= 0
        if not known.any():
            return
        reads = np.zeros(idx.size, dtype=bool)
        reads[known] = table.reads[tid[known]]
        sel = np.flatnonzero(reads & ~slow)  # read from their shapes now
        tl, tt, tv = idx[sel], tid[sel], tv[sel]
        rh = rh.copy()
        rh[new[known]] = 0  # known now: read per line (a shape read per line, or a slow value) or from it
        keep = np.ones(scan.residual.size, dtype=bool)
        keep[new[sel]] = False
        scan.residual, scan.rhash = scan.residual[keep], rh[keep]
        if tl.size:
            if scan.tl is None:
                scan.tl, scan.tt, scan.tv = tl, tt, tv
            else:  # (both in line order, no line in both)
                at = np.searchsorted(scan.tl, tl)
                scan.tl, scan.tt = np.insert(scan.tl, at, tl), np.insert(scan.tt, at, tt)
                scan.tv = np.insert(scan.tv, at, tv, axis=0)

    def _shaped(self, scan: _Scan, fed_at: np.ndarray | None, first: int, columns: dict, items: list) -> None:
        """What the lines of learnt shapes not read per line (`fed_at`: a bool per line of the
        block, or None for none) hold: records in columns (`columns`, per framework) or items
        (added to `items`, which is then put back in line order)."""
        table = scan.table
        tl, tt, tv = scan.tl, scan.tt, scan.tv
        at = None  # rows of tv of the lines kept (None: all of them; rows are not copied)
        if fed_at is not None:
            keep = ~fed_at[tl]
            if not keep.all():
                at = np.flatnonzero(keep)
                tl, tt = tl[at], tt[at]
        if tl.size == 0:
            return
        self.shapes.hits += int(tl.size)
        pre = scan.grouped
        if pre is not None and pre[0] is scan.tl:  # (worked out on the scan thread)
            as_rows = pre[1] if at is None else pre[1][at]
            parts = pre[2] if at is None else [(fw, r.part(~fed_at[r.line])) for fw, r in pre[2]]
        else:
            as_rows = table.as_rows[tt]
            hinted = table.hinted[tt]
            if hinted.any():  # records without a step: in columns once the builder numbers them as they come
                dated = np.zeros(len(table.templates), dtype=bool)
                for t in np.unique(tt[hinted]).tolist():
                    dated[t] = self.builder.dated(table.templates[t].framework)
                as_rows |= hinted & dated[tt]
            parts = _grouped(table, tl, tt, tv, as_rows, at)
        for fw, rows in parts:
            if len(rows):
                rows.line = rows.line + first
                columns.setdefault(fw, []).append(rows)
        other = np.flatnonzero(~as_rows & table.objects[tt])
        self.stats.columnar += int(np.count_nonzero(~as_rows))  # (records in columns: counted with the rest)
        if other.size and self.builder.counts_only():
            # The builder keeps no more events, it counts them: lines of shapes that only make
            # events of fixed kinds are counted by shape.
            ids, n = np.unique(tt[other], return_counts=True)
            counted = np.zeros(len(table.templates), dtype=bool)
            for t, m in zip(ids.tolist(), n.tolist()):
                kinds = _event_kinds(table.templates[t])
                if kinds is not None:
                    for kind in kinds:
                        self.builder.count_event(kind, m)
                    counted[t] = True
            other = other[~counted[tt[other]]]
        if other.size:
            # Lines of shapes that only make evaluation records, of one framework: the builder
            # only counts those, so do they (and the read statistics), by shape.
            ids, n = np.unique(tt[other], return_counts=True)
            counted = np.zeros(len(table.templates), dtype=bool)
            fws = self.stats.frameworks
            for t, m in zip(ids.tolist(), n.tolist()):
                got = _evals_only(table.templates[t])
                if got is not None:
                    fw, k = got
                    self.builder.count_evals(k * m)
                    fws[fw] = fws.get(fw, 0) + k * m
                    counted[t] = True
            if counted.any():
                other = other[~counted[tt[other]]]
        if other.size:
            body, starts, nl = scan.body, scan.starts, scan.nl
            for k in other.tolist():
                i = int(tl[k])
                tpl = table.templates[int(tt[k])]
                text = line_text(body[int(starts[i]):int(nl[i])]) if tpl.slices else None
                for item in make_items(tpl, first + i, tv[k if at is None else int(at[k])], text):
                    items.append((first + i, item))

    def _with_triggers(self, body: bytes, starts: np.ndarray, nl: np.ndarray, others: np.ndarray) -> np.ndarray:
        """The lines among `others` (indices, in order) holding a literal some parser needs."""
        n = int(nl.size)
        if not self.plan.any_trigger or others.size == 0:
            return np.zeros(0, dtype=np.int64)
        offsets = np.empty(n + 1, dtype=np.int64)
        offsets[:n] = starts
        offsets[n] = len(body)
        lines = pa.LargeBinaryArray.from_buffers(pa.large_binary(), n, [None, pa.py_buffer(offsets),
                                                                         pa.py_buffer(body)])
        if others.size < n:
            lines = lines.take(_indices(others))
        hit = _bools(pc.match_substring_regex(lines, self.plan.any_trigger))
        return others[hit]

    # -- Megatron iteration lines in columns -----------------------------------------------------
    def _megatron(self, body: bytes, a: np.ndarray, starts: np.ndarray, nl: np.ndarray,
                  cand_mask: np.ndarray | None = None) -> tuple[Rows | None, np.ndarray]:
        none = (None, np.zeros(0, dtype=np.int64))
        if len(body) < 8:
            return none
        if cand_mask is not None:  # the compiled path: candidates found with the lines
            cand = np.flatnonzero(cand_mask)
            if cand.size == 0:
                return none
            ctx = ("native", body, a.ctypes.data, starts, nl)
        else:
            pipes = np.flatnonzero(a == 124)
            if pipes.size == 0:
                return none
            first = np.searchsorted(pipes, starts)
            npipes = np.searchsorted(pipes, nl) - first
            ends_pipe = a[np.maximum(nl - 1, 0)] == 124
            cand = np.flatnonzero(ends_pipe & (npipes >= 2) & (nl > starts))
            if cand.size == 0:
                return none
            words = np.ndarray((len(body) - 7,), dtype="<u8", buffer=body, strides=(1,))
            ctx = ("numpy", body, a, words, pipes, first, npipes, starts)
        parts: list[tuple[np.ndarray, dict]] = []
        remaining = cand
        used: list[_Layout] = []
        with self.lock:
            known = list(self.layouts)
        for lay in known:
            if remaining.size == 0:
                break
            got, remaining = self._match(lay, ctx, remaining)
            if got is not None:
                parts.append(got)
                used.append(lay)
        tries = 0
        while remaining.size and tries < MAX_TRIES:
            tries += 1
            i = int(remaining[0])
            lay = _Layout.learn(body[int(starts[i]):int(nl[i])], self.plan)
            if lay is None:
                remaining = remaining[1:]
                continue
            got, remaining = self._match(lay, ctx, remaining)
            remaining = remaining[remaining != i]  # (it matches its own layout; never loop on it)
            if got is not None:
                parts.append(got)
                used.append(lay)
        with self.lock:
            for lay in reversed(used):  # most recently used first
                if lay in self.layouts:
                    self.layouts.remove(lay)
                self.layouts.insert(0, lay)
            del self.layouts[MAX_LAYOUTS:]
        if not parts:
            return none
        if len(parts) == 1:  # one layout in the block (the usual case): already in line order
            idx, cols = parts[0]
        else:
            idx = np.concatenate([p[0] for p in parts])
            order = np.argsort(idx, kind="stable")
            idx = idx[order]
            cols = {k: np.concatenate([p[1][k] for p in parts])[order] for k in parts[0][1]}
        line = idx.copy()  # block-relative here; _merge adds the block's first line
        extra = {k: cols[k] for k in ("total_steps", "global_batch_size", "consumed_samples", "consumed_tokens")}
        rows = Rows("megatron", line, cols["step"], cols["loss"], cols["has_loss"], cols["loss_missing"],
                    cols["grad_norm"], cols["has_grad_norm"], cols["lr"], cols["loss_scale"], cols["skipped"],
                    cols["nan_iters"], False, extra)
        return rows, idx

    def _wrapped(self, body: bytes, a: np.ndarray, starts: np.ndarray, nl: np.ndarray, done: np.ndarray):
        """Megatron records hard-wrapped over several lines (none of them `done`: a bool per line),
        whose lines no other parser acts on (scan.c: pdx_wrapped): their lines joined as the parser
        joins them, read in columns like any iteration line. (rows (line: each record's last line,
        where the parser emits it), their first lines, every line of them), or None."""
        f, last, joined = native.wrapped(self.kern, a.ctypes.data, len(body), starts, nl, done.view(np.uint8),
                                         _MAX_WRAP, *self.wrap_literals)
        if f.size == 0:
            return None
        aj = np.frombuffer(joined, dtype=np.uint8)
        sj, nj, cj, _ = native.lines(self.kern, joined, aj.ctypes.data)
        rows, idx = self._megatron(joined, aj, sj, nj, cj)
        if rows is None or idx.size == 0:
            return None
        rows.line = last[idx].copy()
        n = last[idx] - f[idx] + 1
        lines = np.repeat(f[idx] - np.cumsum(n) + n, n) + np.arange(int(n.sum()))
        return rows, f[idx], lines

    def _nanotron(self, a: np.ndarray, starts: np.ndarray, nl: np.ndarray, done: np.ndarray):
        """nanotron iteration lines among the lines of a block not `done` (a bool per line) that
        scan.c reads as the parser does (pdx_nanotron): (rows, their lines), or None."""
        idx, step, val, has = native.nanotron(self.kern, a.ctypes.data, starts, nl, done.view(np.uint8),
                                              self.nano_literals)
        if idx.size == 0:
            return None
        nan = np.full(idx.size, np.nan)
        vals = np.where(has, val, np.nan)
        rows = Rows("nanotron", idx.copy(), step, vals[:, 0], has[:, 0].copy(), np.zeros(idx.size, dtype=bool),
                    vals[:, 2], has[:, 2].copy(), vals[:, 1], nan, nan.copy(), nan.copy())
        return rows, idx

    def _match(self, lay: "_Layout", ctx: tuple, remaining: np.ndarray):
        """The rows among `remaining` laid out as `lay`, read; and the rest of `remaining`."""
        if ctx[0] == "native":
            return self._match_native(lay, *ctx[1:], remaining)
        return self._match_numpy(lay, *ctx[1:], remaining)

    def _match_native(self, lay: "_Layout", body: bytes, address: int, starts: np.ndarray, nl: np.ndarray,
                      remaining: np.ndarray):
        """`_match_numpy` in one compiled pass over the lines (native/scan.c: pdx_match)."""
        n = int(remaining.size)
        nseg = lay.npipes - 1
        rem = np.ascontiguousarray(remaining, dtype=np.int64)
        status = np.empty(n, dtype=np.int8)
        vals = np.empty((nseg, n), dtype=np.float64)  # a column per key (unused ones never written)
        vslow = np.zeros((n, nseg), dtype=np.uint8)
        counters = np.empty((n, 2), dtype=np.int64)
        tally = np.zeros(2, dtype=np.int64)
        p, kern = native.ptr, self.kern
        hits = kern.match(address, p(starts), p(nl), p(rem), n, lay.head, lay.kind, lay.head_len, lay.key_blob,
                          p(lay.key_off), lay.used, nseg, lay.w1[0], lay.w1[1], lay.w2[0], lay.w2[1],
                          p(status, native._i8p), p(vals, native._f64p), p(vslow, native._u8p), p(counters),
                          p(tally))
        if hits == 0:
            return None, remaining
        vals = vals.T  # (rows, keys) as the numpy path has them; columns stay contiguous
        if tally[0] == n:  # every candidate read (the usual case): no copies
            if tally[1] == 0:  # and every value a plain number
                return (rem, self._columns(lay, n, vals, None, counters[:, 0], counters[:, 1])), rem[:0]
            sel, rest, slow = rem, rem[:0], vslow
        else:
            matched = status > 0
            rest = rem[~matched]  # matched rows are done with, read or not
            keep = status == 1
            if not keep.any():
                return None, rest
            sel, vals, slow, counters = rem[keep], vals[keep], vslow[keep], counters[keep]
        has = np.ones((sel.size, nseg), dtype=bool)
        keep = np.ones(sel.size, dtype=bool)
        if slow.any():  # spellings the kernel leaves to the shared number grammar (rare)
            for r, k in zip(*np.nonzero(slow)):
                i = int(sel[r])
                line = body[int(starts[i]):int(nl[i])]
                at = -1
                for _ in range(k + 1):
                    at = line.index(b"|", at + 1)
                self._reread(line[at + int(lay.key_len[k]):line.index(b"|", at + 1)], r, k, vals, has, keep)
            if not keep.all():
                sel, vals, has, counters = sel[keep], vals[keep], has[keep], counters[keep]
            if sel.size == 0:
                return None, rest
        return (sel, self._columns(lay, sel.size, vals, has, counters[:, 0], counters[:, 1])), rest

    def _reread(self, value: bytes, r: int, k: int, vals: np.ndarray, has: np.ndarray, keep: np.ndarray) -> None:
        """Value k of row r, which the fast read left alone: a row whose value holds a literal
        another parser needs goes per line (keep False); else the shared number grammar reads it
        (not a number: not printed)."""
        text = value.decode("utf-8", errors="replace")
        if any(t in text for t in self.plan.relevant_text):
            keep[r] = False
            return
        v = parse_num(text)
        if v is None:
            has[r, k] = False
            vals[r, k] = np.nan
        else:
            vals[r, k] = v

    def _match_numpy(self, lay: "_Layout", body: bytes, a: np.ndarray, words: np.ndarray, pipes: np.ndarray,
                     first: np.ndarray, npipes: np.ndarray, starts: np.ndarray, remaining: np.ndarray):
        sel = remaining[npipes[remaining] == lay.npipes]
        if sel.size == 0 or len(body) < lay.min_len:
            return None, remaining
        pm = pipes[first[sel][:, None] + np.arange(lay.npipes)]
        p0 = pm[:, 0]
        ok = (p0 - starts[sel]) == lay.head_len
        # (positions clipped: a row whose head is shorter than the layout's has already failed)
        if lay.w_off.size:  # the head: fixed bytes, 8 at a time
            pos = np.clip(p0[:, None] + lay.w_off, 0, words.size - 1).ravel()
            got = words[pos].reshape(p0.size, lay.w_off.size)
            got ^= lay.w_val
            got &= lay.w_mask
            ok &= ~got.any(axis=1)
        for k, key in enumerate(lay.keys):  # each key, whole (a line too short for it cannot match)
            items = _items(body, key.dtype.itemsize)
            ok &= items[np.minimum(pm[:, k] + 1, items.size - 1)] == key
        if lay.digit_off.size:
            ok &= ((a[np.maximum(p0[:, None] + lay.digit_off, 0)] - 48) <= 9).all(axis=1)
        ok &= a[np.maximum(p0 + lay.w1[0], 0)] == 32  # `iteration\s+`
        if not ok.all():
            sel, pm = sel[ok], pm[ok]
        if sel.size == 0:
            return None, remaining
        rest = np.setdiff1d(remaining, sel, assume_unique=True)  # matched rows are done with, read or not
        vals, has, step, total, keep = self._values(body, a, pm, lay)
        if not keep.all():  # an odd counter, or a value holding a literal another parser needs: per line
            sel, vals, has, step, total = sel[keep], vals[keep], has[keep], step[keep], total[keep]
        if sel.size == 0:
            return None, rest
        return (sel, self._columns(lay, sel.size, vals, has, step, total)), rest

    @staticmethod
    def _columns(lay: "_Layout", m: int, vals: np.ndarray, has: np.ndarray | None, step: np.ndarray,
                 total: np.ndarray) -> dict:
        """The Rows columns of `m` rows of one layout from their values (what was printed; `has`
        None: every value was)."""
        nan = np.full(m, np.nan)
        no = np.zeros(m, dtype=bool)
        if has is None:  # every value printed as a number (the usual case)
            every = np.ones(vals.shape[1], dtype=bool)
            yes = np.ones(m, dtype=bool)
        else:
            every = has.all(axis=0)  # per value: printed as a number on every row

        def col(name: str) -> tuple[np.ndarray, np.ndarray]:
            k = lay.field.get(name)
            return (nan, no) if k is None else (vals[:, k], yes if has is None else has[:, k])

        def printed(v: np.ndarray, h: np.ndarray, name: str) -> np.ndarray:
            k = lay.field.get(name)
            return np.ascontiguousarray(v) if k is not None and every[k] else np.where(h, v, np.nan)

        loss, has_loss = col("loss")
        gn, has_gn = col("grad_norm")
        lr, has_lr = col("lr")
        scale, has_scale = col("loss_scale")
        skipped, has_sk = col("skipped")
        nan_iters, has_nan = col("nan_iters")
        with np.errstate(invalid="ignore"):
            skipped = np.where(has_sk & np.isfinite(skipped), np.trunc(skipped), np.nan)
            nan_iters = np.where(has_nan & np.isfinite(nan_iters), np.trunc(nan_iters), np.nan)
        out = {"step": step, "loss": printed(loss, has_loss, "loss"), "has_loss": has_loss,
               "loss_missing": ~has_loss & lay.after, "grad_norm": printed(gn, has_gn, "grad_norm"),
               "has_grad_norm": has_gn, "lr": printed(lr, has_lr, "lr"),
               "loss_scale": printed(scale, has_scale, "loss_scale"), "skipped": skipped, "nan_iters": nan_iters,
               "total_steps": np.where(total > 0, total.astype(np.float64), np.nan)}
        for name in ("global_batch_size", "consumed_samples", "consumed_tokens"):
            v, h = col(name)
            out[name] = printed(v, h, name)
        return out

    def _values(self, body: bytes, a: np.ndarray, pm: np.ndarray, lay: "_Layout"):
        """The numbers of the rows, cast in bulk: every value (numbers, printed-as-a-number mask),
        the step and total counters, and which rows can be read this way. A value the cast does
        not take (or takes as NaN/Inf, whose spellings may carry letters) is read with the shared
        number grammar and looked at for the literals that would make another parser act (the row
        then goes per line); a counter must be plain digits (no sign, no leading zero) below 2^53."""
        m, nv = pm.shape[0], lay.npipes - 1
        p0 = pm[:, 0]
        offsets = np.empty((m, 2 * nv + 4), dtype=np.int64)  # per row: step, total, values
        offsets[:, 0] = p0 + lay.w1[0]
        offsets[:, 1] = p0 + lay.w1[1]
        offsets[:, 2] = p0 + lay.w2[0]
        offsets[:, 3] = p0 + lay.w2[1]
        offsets[:, 4::2] = pm[:, :-1] + lay.key_len
        offsets[:, 5::2] = pm[:, 1:]
        offsets = offsets.ravel()
        arr = pa.LargeStringArray.from_buffers(offsets.size - 1, pa.py_buffer(offsets), pa.py_buffer(body))
        arr = pc.ascii_trim(arr.take(_indices(np.arange(0, offsets.size - 1, 2))), " ")
        try:
            nums = _numbers(pc.cast(arr, pa.float64()), np.float64).reshape(m, nv + 2)
            bad = None
        except pa.ArrowInvalid:
            good = pc.match_substring_regex(arr, _STRICT_NUM)
            nums = _numbers(pc.cast(pc.if_else(good, arr, "nan"), pa.float64()), np.float64)
            nums = nums.reshape(m, nv + 2)
            bad = ~_bools(good).reshape(m, nv + 2)
        counters = nums[:, :2]
        length = _numbers(pc.binary_length(arr), np.int64).reshape(m, nv + 2)[:, :2]
        with np.errstate(invalid="ignore"):
            digits = np.searchsorted(_POW10F, counters, side="right") + 1
            keep = ((counters >= 0) & (counters < 2.0 ** 53) & (np.trunc(counters) == counters)
                    & (digits == length)).all(axis=1)
        if bad is not None:
            keep &= ~bad[:, :2].any(axis=1)
        vals = nums[:, 2:].copy()
        has = np.ones((m, nv), dtype=bool)
        slow = ~np.isfinite(vals)
        if bad is not None:
            slow |= bad[:, 2:]
        if slow.any():
            for r, k in zip(*np.nonzero(slow)):
                start = int(pm[r, k] + lay.key_len[k])
                self._reread(body[start:int(pm[r, k + 1])], r, k, vals, has, keep)
        return vals, has, counters[:, 0].astype(np.int64), counters[:, 1].astype(np.int64), keep


def _by_shape(shapes: np.ndarray, idx: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """`idx` grouped by `shapes` (one per entry): (shape, its entries of `idx` in their order), by
    shape number (one stable sort, not a pass over `idx` per shape)."""
    if idx.size == 0:
        return []
    order = np.argsort(shapes, kind="stable")
    ordered = shapes[order]
    cut = np.flatnonzero(ordered[1:] != ordered[:-1]) + 1
    bounds = [0, *cut.tolist(), int(idx.size)]
    picked = idx[order]
    return [(int(ordered[a]), picked[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]


def _keys(table, tt: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Of lines of learnt shapes `tt`: the state key and mask each was learnt under, and which
    of them are of dynamic shapes (indices)."""
    return table.state[tt], table.maskid[tt], np.flatnonzero(table.dynamic[tt])


def _grouped(table, tl: np.ndarray, tt: np.ndarray, tv: np.ndarray, as_rows: np.ndarray,
             at: np.ndarray | None) -> list[tuple[str, Rows]]:
    """The records of lines `tl` of learnt shapes `tt` (tokens: rows `at` of `tv`, or all of it)
    that `as_rows` marks, in columns by framework (line = the line in `tl`). A framework whose
    shapes are both cumulative and not keeps its lines out (never seen; as_rows cleared there)."""
    out: list[tuple[str, Rows]] = []
    if not as_rows.any():
        return out
    by_fw: dict[tuple[str, bool], list[int]] = {}
    for t in np.flatnonzero(np.bincount(tt[as_rows])).tolist():
        tpl = table.templates[t]
        by_fw.setdefault((tpl.framework, tpl.cumulative), []).append(t)
    mixed = {fw for fw, _ in by_fw if (fw, True) in by_fw and (fw, False) in by_fw}
    if len(by_fw) == 1 and as_rows.all():  # (the usual block: all its lines one group)
        (fw, cumulative), _ = next(iter(by_fw.items()))
        return [(fw, rows_of(table, fw, tl, tt, tv, cumulative, at))]
    for (fw, cumulative), ts in by_fw.items():
        sel = np.flatnonzero(as_rows & np.isin(tt, ts))
        if fw in mixed:
            as_rows[sel] = False
            continue
        out.append((fw, rows_of(table, fw, tl[sel], tt[sel], tv, cumulative, sel if at is None else at[sel])))
    return out


def _event_kinds(tpl) -> tuple | None:
    """The kinds of the events a learnt shape makes, when it makes only events of fixed kinds that
    nothing but their count is kept of once the builder is full (not a re-run verdict: those set
    the step of later ones); else None."""
    kinds = []
    for cls, attrs, _ in tpl.items:
        how = attrs.get("kind")
        if cls is not Event or how is None or how[0] != "const" or str(how[1]).startswith("rerun_"):
            return None
        kinds.append(how[1])
    return tuple(kinds)


def _evals_only(tpl) -> tuple[str, int] | None:
    """(framework, records per line) when a learnt shape makes only evaluation records of one
    framework, both fixed (SeriesBuilder.add counts such records, nothing more); else None."""
    fw = None
    for cls, attrs, _ in tpl.items:
        kind, framework = attrs.get("kind"), attrs.get("framework")
        if (cls is not Record or kind is None or kind[0] != "const" or kind[1] == "train" or framework is None
                or framework[0] != "const" or fw not in (None, framework[1])):
            return None
        fw = framework[1]
    return None if fw is None else (fw, len(tpl.items))


_ROW_FIELDS = ("step_hint", "loss", "grad_norm", "lr", "loss_scale", "skipped", "nan_iters")


def _rows_ok(tpl, builder) -> bool:
    """Whether the records of lines of dynamic shape `tpl` go in columns (`_dynamic_rows`): each
    line one train record that prints no step (dated by the state, an HF dict after its progress
    counter), of a framework whose such records the builder numbers as they come (once so, so
    for good), every value a token, the state, or a number / None."""
    form = tpl.row_form
    if form is None:
        form = tpl.row_form = _row_form(tpl)
    return form and builder.dated(tpl.framework)


def _row_form(tpl) -> bool:
    """`_rows_ok` but for the builder: what the shape's record is made of."""
    if len(tpl.items) != 1:
        return False
    cls, attrs, extra = tpl.items[0]
    if (cls is not Record or attrs["kind"] != ("const", "train") or attrs["step"] != ("const", None)
            or attrs["loss_missing"][0] != "const" or attrs["skipped_cumulative"][0] != "const"
            or any(how[0] == "slice" for how in attrs.values())):
        return False
    return all(how[0] in ("tok", "state") or (how[0] == "const" and (how[1] is None or numeric(how[1])))
               for how in (*(attrs[name] for name in _ROW_FIELDS), *extra.values()))


def _dynamic_rows(tpl, lines: np.ndarray, tv: np.ndarray, state_at, q: np.ndarray, builder) -> Rows | None:
    """The records of lines of a dynamic shape in columns when `_rows_ok`; else None (made as
    objects). `state_at(q, j)`: state value j before lines q (float, NaN: None)."""
    if not _rows_ok(tpl, builder):
        return None
    cls, attrs, extra = tpl.items[0]
    n = lines.size

    def col(how) -> np.ndarray | None:
        if how[0] == "tok":
            return tv[:, how[1]].astype(np.float64)
        if how[0] == "state":
            return state_at(q, how[1])
        if how[1] is None:
            return np.full(n, np.nan)
        return np.full(n, float(how[1])) if numeric(how[1]) else None

    got = {name: col(attrs[name]) for name in _ROW_FIELDS}
    ex = {k: col(how) for k, how in extra.items()}
    def printed(name: str) -> np.ndarray:  # (a value read from the state is printed unless it was None)
        how = attrs[name]
        return ~np.isnan(got[name]) if how[0] == "state" else np.full(n, how != ("const", None))

    has_loss, has_gn = printed("loss"), printed("grad_norm")
    with np.errstate(invalid="ignore"):
        skipped = np.trunc(got["skipped"])
        nan_iters = np.trunc(got["nan_iters"])
    return Rows(tpl.framework, lines.astype(np.int64), got["step_hint"], got["loss"], has_loss,
                np.full(n, bool(attrs["loss_missing"][1])), got["grad_norm"], has_gn, got["lr"], got["loss_scale"],
                skipped, nan_iters, bool(attrs["skipped_cumulative"][1]), ex, np.ones(n, dtype=bool))


def _indices(idx: np.ndarray):
    """Row indices as an Arrow int64 array, from the numpy buffer (`pa.array` would load pandas
    to look at its argument, 0.2 s)."""
    idx = np.ascontiguousarray(idx, dtype=np.int64)
    return pa.Array.from_buffers(pa.int64(), int(idx.size), [None, pa.py_buffer(idx)])


def _numbers(arr, dtype) -> np.ndarray:
    """An Arrow float64/int64 array without nulls as numpy, from its data buffer (a copy: the
    caller may write into it)."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    n = len(arr)
    if arr.null_count:  # pragma: no cover - casts of the values never make nulls
        raise ValueError("null in a bulk cast")
    return np.frombuffer(arr.buffers()[1], dtype=dtype)[arr.offset:arr.offset + n].copy()


def _bools(arr) -> np.ndarray:
    """An Arrow boolean array without nulls as numpy bools, from its bit buffer (its
    `to_numpy` goes through pandas)."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if arr.null_count:  # pragma: no cover - the scans never make nulls
        return arr.fill_null(False).to_numpy(zero_copy_only=False)
    n = len(arr)
    if n == 0:
        return np.zeros(0, dtype=bool)
    bits = np.frombuffer(arr.buffers()[1], dtype=np.uint8)
    return np.unpackbits(bits, bitorder="little", count=arr.offset + n)[arr.offset:].astype(bool)


def _items(body: bytes, size: int) -> np.ndarray:
    """Every `size`-byte run of `body` as one item (a view: item i is body[i:i+size])."""
    return np.ndarray((len(body) - size + 1,), dtype=f"V{size}", buffer=body, strides=(1,))


class _Layout:
    """The byte layout of one kind of Megatron iteration line: the text before `iteration` with
    its digits as wildcards, the counter fields as fixed-width windows, then `| key: value |`
    segments with fixed keys. Matching lines have the same bytes outside values and wildcards,
    so they read as the line it was learnt from reads, with their own numbers."""

    def __init__(self) -> None:
        self.npipes = 0
        self.head_len = 0          # bytes from line start to the first pipe
        self.min_len = 0           # bytes of the shortest line of this layout
        self.key_len = np.zeros(0, dtype=np.int64)  # per segment: bytes from its pipe to its value
        self.field: dict[str, int] = {}             # Rows field -> segment
        self.after = False         # a field Megatron prints after the losses is present
        self.w1 = (0, 0)           # step window, relative to the first pipe
        self.w2 = (0, 0)           # total window
        self.digit_off = np.zeros(0, dtype=np.int64)
        self.w_off = np.zeros(0, dtype=np.int64)    # head checks, 8 bytes each: offset from the first pipe,
        self.w_mask = np.zeros(0, dtype=np.uint64)  # which bytes count,
        self.w_val = np.zeros(0, dtype=np.uint64)   # and the bytes expected
        self.keys: list = []       # per segment: its key (from the pipe to the colon) as a numpy void
        self.head = b""           # the compiled matcher's view: head bytes, per byte 0 fixed /
        self.kind = b""           # 1 digit / 2 counter window, and the keys end to end with offsets
        self.key_blob = b""
        self.key_off = np.zeros(1, dtype=np.int64)
        self.used = b""           # per segment: 1 when the series reads its value

    @classmethod
    def learn(cls, line: bytes, plan: _Plan) -> "_Layout | None":
        """The layout of `line` (bytes, no newline), or None when it is not a Megatron iteration
        line that can be read in columns (not ASCII, an unusual header, a segment without a key,
        or a literal another parser needs could show up in lines of this layout)."""
        if not line.isascii():
            return None
        text = line.decode("ascii")
        pipes = [i for i, c in enumerate(text) if c == "|"]
        if len(pipes) < 2 or pipes[-1] != len(text) - 1:
            return None
        m = HEADER.search(text)
        if m is None or m.end() - 1 != pipes[0]:
            return None
        p0 = pipes[0]
        it = m.start()
        slash = text.find("/", it + len(_ITER))
        w1, w2 = text[it + len(_ITER):slash], text[slash + 1:p0]
        if not (_is_window(w1, lead=True) and _is_window(w2, lead=False)) or max(len(w1), len(w2)) > 18:
            return None
        lay = cls()
        lay.npipes = len(pipes)
        lay.head_len = p0
        lay.w1 = (it + len(_ITER) - p0, slash - p0)
        lay.w2 = (slash + 1 - p0, 0)
        keys: list[str] = []
        names: list[str] = []
        for k in range(len(pipes) - 1):
            seg = text[pipes[k] + 1:pipes[k + 1]]
            c = seg.find(":")
            if c < 0:
                return None
            keys.append(seg[:c + 1])
            key = seg[:c].strip()
            if "  " in key or not key.islower():
                key = " ".join(key.split()).lower()
            names.append(key)
        fields: dict[str, int] = {}
        for k, name in enumerate(names):
            if name:
                fields[name] = k  # later keys win, as in parse_fields
        lay.field = {_FIELDS[n]: k for n, k in fields.items() if n in _FIELDS}
        lay.after = any(k in fields for k in _AFTER_LOSSES)
        lay.key_len = np.array([1 + len(k) for k in keys], dtype=np.int64)
        lay.min_len = p0 + int(lay.key_len.sum()) + 2  # head, pipes and keys, the last pipe, a newline
        # The head (line start .. first pipe): literal bytes, digits of the prefix as wildcards,
        # the counter windows as spaces/digits (read as numbers with the values).
        head = line[:p0]
        wild = [""] * p0  # "d": a digit; "s": a space or a digit (counter windows)
        for i in range(it):
            if 48 <= head[i] <= 57:
                wild[i] = "d"
        for i in range(it + len(_ITER), p0):
            if i != slash:
                wild[i] = "s"
        if not _safe(head, wild, keys, plan.relevant):
            return None
        lay.digit_off = np.array([i - p0 for i in range(it) if wild[i]], dtype=np.int64)
        segs, offs, masks, vals = [], [], [], []
        _words(head, [not w for w in wild], -p0, 0, segs, offs, masks, vals)
        lay.keys = [np.frombuffer(k.encode("ascii"), dtype=f"V{len(k)}")[0] for k in keys]
        lay.head = bytes(head)  # for the compiled matcher: the head, what each byte of it must be,
        lay.kind = bytes(0 if not w else 1 if w == "d" else 2 for w in wild)
        lay.key_blob = "".join(keys).encode("ascii")  # and the keys end to end
        lay.key_off = np.concatenate([[0], np.cumsum([len(k) for k in keys])]).astype(np.int64)
        lay.used = bytes(1 if k in lay.field.values() else 0 for k in range(len(keys)))  # keys read
        lay.w_off = np.array(offs, dtype=np.int64)
        lay.w_mask = np.array(masks, dtype=np.uint64)
        lay.w_val = np.array(vals, dtype=np.uint64)
        return lay


def _is_window(s: str, lead: bool) -> bool:
    """Spaces, one run of digits, spaces (with a leading space for the step: `\\s+`)."""
    core = s.strip(" ")
    if not core.isdigit() or not core.isascii() or s.count(" ") + len(core) != len(s):
        return False
    return s.startswith(" ") if lead else True


def _words(data: bytes, fixed: list[bool], base: int, seg: int, segs: list, offs: list, masks: list,
           vals: list) -> None:
    """8-byte word checks covering `data` (at `base` bytes from pipe `seg`), ignoring the bytes
    not `fixed`. A short field is read with the bytes before it (masked out)."""
    n = len(data)
    if n == 0:
        return
    if n >= 8:
        starts = list(range(0, n - 7, 8))
        if starts[-1] != n - 8:
            starts.append(n - 8)
    else:
        starts = [n - 8]
    for s in starts:
        mask = 0
        val = 0
        for j in range(8):
            i = s + j
            if 0 <= i < n and fixed[i]:
                mask |= 0xFF << (8 * j)
                val |= data[i] << (8 * j)
        if mask:
            segs.append(seg)
            offs.append(base + s)
            masks.append(mask)
            vals.append(val)


def _safe(head: bytes, wild: list[str], keys: list[str], relevant: list[bytes]) -> bool:
    """No literal another parser needs can occur in a line of this layout outside its values:
    not in the head (fixed bytes, digits, counter windows), not in or across a key, not inside a
    finite value the bulk cast takes (with its padding); none holds a pipe, so none spans one."""
    if any(b"|" in t or set(t) <= _VALUE_CHARS for t in relevant):
        return False
    # the head with its wildcards as marker bytes (a digit: 1, a space or a digit: 2), each
    # literal as a pattern whose digits and spaces also match those
    marked = bytes(1 if w == "d" else 2 if w == "s" else c for c, w in zip(head, wild))
    if any(_head_pattern(t).search(marked) for t in relevant):
        return False
    prefixes, longest = _prefixes(tuple(relevant))
    for key in keys:
        kb = key.encode("ascii")
        if any(t in kb for t in relevant) or any(kb[-j:] in prefixes for j in range(1, min(longest, len(kb)) + 1)):
            return False  # (a literal in the key, or one that starts in it and runs on past its end)
    return True


@functools.lru_cache(maxsize=1024)
def _head_pattern(t: bytes) -> "re.Pattern[bytes]":
    """Where literal `t` can be in a head `_safe` marks: its digits also on a marker byte 1 or 2,
    its spaces on 2. (A head byte 1 or 2 of its own counts as a marker: a layout refused, never
    one let through.)"""
    out = []
    for c in t:
        if 48 <= c <= 57:
            out.append(b"[" + bytes([c]) + b"\x01\x02]")
        elif c == 32:
            out.append(b"[ \x02]")
        else:
            out.append(re.escape(bytes([c])))
    return re.compile(b"".join(out))


@functools.lru_cache(maxsize=64)
def _prefixes(relevant: tuple[bytes, ...]) -> tuple[frozenset[bytes], int]:
    """The proper prefixes of the literals, and the longest one's length."""
    pre = frozenset(t[:j] for t in relevant for j in range(1, len(t)))
    return pre, max((len(x) for x in pre), default=0)
