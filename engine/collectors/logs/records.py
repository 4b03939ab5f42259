"""OLMo's multi-line records read in bulk by the block reader (issue 17).

An OLMo console record is a header line (`... [step=N/T,epoch=E]`) and the indented `key=value`
lines after it; the parser keeps it pending until the next line that is not such a body line
(formats/olmo.py). Pending, it sees every line, so the per-line machinery (and the line shapes,
which are learnt only between records) read such a log one line at a time.

Here a block's records are found in one compiled pass (scan.c: pdx_olmo, which sorts each line as
the parser's regular expressions see it, or leaves it to them), on the scan thread:

- A *chain* is a run of consecutive lines that starts at a header and holds only headers and body
  lines in which no other parser (but a fallback one, which never sees a line the OLMo parser
  swallows) finds a literal it needs. Each record of a chain ends where the next header starts
  (the header closes it, as the parser closes it there); the chain's last record is still open
  where the chain ends (the next line may be anything).
- Its records' fields are the last value each field got from the body lines, as the parser's
  `_absorb` sets them (same key table, `FIELDS`; values the kernel does not read exactly are
  read with the shared number grammar).

When the merging thread reaches a chain's header, with no parser mid-record but the OLMo one, it
takes the records as read: the record the parser held (if any) is closed there, the records the
chain closes go to the builder in columns, and its last record is handed to the parser (`hold`),
which the lines after the chain then finish as before. A header also reaches the other parsers:
what they make of it depends only on its shape (they are digit-blind, see shapes.py), and is
learnt once per shape and state pattern by feeding the line and variants of it to a copy of them
(`Shapes._template`); a chain is only read up to a header whose shape they do not leave alone.
Anything else (a header the others act on, a parser mid-record, an odd line) is read per line.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from precdx.collectors.logs import native
from precdx.collectors.logs.formats.olmo import BODY, FIELDS, OlmoParser
from precdx.collectors.logs.model import Record, Rows, parse_num
from precdx.collectors.logs.reader import Dispatcher, line_text, trigger_literals
from precdx.collectors.logs.shapes import Shapes, fingerprint

_CODES = {"loss": 1, "grad_norm": 2, "lr": 3, "skipped": 4, "spike_score": 5}
MAX_VERDICTS = 256  # header shapes (under a state pattern) looked at per file


@dataclass
class Chains:
    """The OLMo records of one block that may be read in bulk (lines block-relative, in order)."""

    head: np.ndarray     # each record's header line
    end: np.ndarray      # the last line of the chain it belongs to
    hash: np.ndarray     # its header's shape hash
    rows: Rows           # the records as the parser closes them (line: the next header, where it does)
    has: dict            # per field: the record set it (lr, spike score: a printed NaN is not "unset")
    lines: np.ndarray    # every line of the chains

    def record(self, k: int, first: int) -> Record:
        """Record k as the parser holds it (lines numbered from `first`)."""
        r, has = self.rows, self.has
        rec = Record(line=first + int(self.head[k]), framework="olmo", step=int(r.step[k]),
                     extra={"epoch": float(r.extra["epoch"][k])})
        if has["loss"][k]:
            rec.loss = float(r.loss[k])
        if has["grad_norm"][k]:
            rec.grad_norm = float(r.grad_norm[k])
        if has["lr"][k]:
            rec.lr = float(r.lr[k])
        if has["skipped"][k] and not math.isnan(r.skipped[k]):
            rec.skipped = int(r.skipped[k])
        if has["spike_score"][k]:
            rec.extra["spike_score"] = float(r.extra["spike_score"][k])
        return rec


class OlmoRecords:
    """What the block reader needs to read one file's OLMo records in bulk."""

    def __init__(self, dispatcher: Dispatcher, kern, literals: list[bytes]) -> None:
        self.parser = next(p for p in dispatcher.parsers if type(p) is OlmoParser)
        self.others = [p for p in dispatcher.parsers if p is not self.parser]
        self.rest = Dispatcher(self.others)  # (the same parser objects)
        self.shapes = Shapes(self.rest, kern)
        self.kern = kern
        # body-line keys, and the literals of the parsers that see a line the OLMo parser swallows
        self.keys = native.OlmoKeys([(k, _CODES[f], prefix) for k, f, prefix in FIELDS], literals)
        self.masks: dict[int, int] = {}   # header shape hash -> its mask (Shapes._mask)
        self.verdicts: dict[tuple[int, int], bool] = {}  # (hash, pattern key) -> the others leave it alone

    @classmethod
    def of(cls, dispatcher: Dispatcher, kern) -> "OlmoRecords | None":
        if kern is None or not any(type(p) is OlmoParser for p in dispatcher.parsers):
            return None
        literals = trigger_literals([p for p in dispatcher.parsers if type(p) is not OlmoParser], fallback=False)
        if any(not t or b"\n" in t for t in literals):
            return None  # (never in the block reader: _Plan.of reads such a file per line)
        return cls(dispatcher, kern, literals)

    # -- the scan thread ---------------------------------------------------------------------------
    def scan(self, body: bytes, address: int, starts: np.ndarray, nl: np.ndarray, others: np.ndarray) -> Chains | None:
        """The chains among lines `others` (indices, in order) of a block."""
        if others.size == 0:
            return None
        kind, step, epoch, hashes, field, val, vok, lit = native.olmo(self.kern, address, starts, nl, others,
                                                                       self.keys)
        hdr = kind == 1
        if not hdr.any():
            return None
        ok = hdr | ((kind == 2) & ~lit)
        m = np.flatnonzero(ok)
        ml = others[m]
        mh = hdr[m]
        # runs of consecutive lines; a chain is a run from its first header on
        new = np.ones(m.size, dtype=bool)
        new[1:] = ml[1:] != ml[:-1] + 1
        run_start = np.maximum.accumulate(np.where(new, np.arange(m.size), 0))
        last_hdr = np.maximum.accumulate(np.where(mh, np.arange(m.size), -1))
        inside = last_hdr >= run_start
        if not inside.any():
            return None
        m, ml, mh, run_start = m[inside], ml[inside], mh[inside], run_start[inside]
        rec_of = np.cumsum(mh) - 1  # (every kept line is at or after a header of its run)
        heads = np.flatnonzero(mh)
        nrec = heads.size
        # the last line of each run
        last = np.ones(m.size, dtype=bool)
        last[:-1] = run_start[1:] != run_start[:-1]
        chain_of = np.concatenate(([0], np.cumsum(last[:-1])))  # (runs ended before each line)
        end = ml[last][chain_of[heads]]
        cols = {name: np.full(nrec, np.nan) for name in _CODES}
        has = {name: np.zeros(nrec, dtype=bool) for name in _CODES}
        f = field[m]
        for name, code in _CODES.items():
            sel = np.flatnonzero(f == code)
            if sel.size == 0:
                continue
            v = val[m[sel]].copy()
            good = vok[m[sel]].copy()
            for j in np.flatnonzero(~good).tolist():  # spellings the kernel leaves to the number grammar
                i = int(ml[sel[j]])
                x = parse_num(BODY.match(line_text(body[int(starts[i]):int(nl[i])])).group(2))
                if x is not None:
                    v[j], good[j] = x, True
            if name == "skipped":  # int(value): an infinite one fails (the line sets nothing)
                good &= ~np.isinf(v)
                v = np.trunc(v)
            sel, v = sel[good], v[good]
            if sel.size == 0:
                continue
            r = rec_of[sel]
            keep = np.ones(r.size, dtype=bool)  # the last value each record got
            keep[:-1] = r[1:] != r[:-1]
            cols[name][r[keep]] = v[keep]
            has[name][r[keep]] = True
        h = m[heads]
        # A record goes to the builder where the next header closes it (its place in the stream,
        # as an item's `at`); the chain's last one is held, not added from here.
        closed = np.append(ml[heads][1:], -1)
        rows = Rows("olmo", closed, step[h].astype(np.float64), cols["loss"], has["loss"],
                    np.zeros(nrec, dtype=bool), cols["grad_norm"], has["grad_norm"], cols["lr"],
                    np.full(nrec, np.nan), cols["skipped"], np.full(nrec, np.nan), False,
                    {"epoch": epoch[h].copy(), **({"spike_score": cols["spike_score"]} if has["spike_score"].any() else {})})
        return Chains(ml[heads], end, hashes[h], rows, has, ml)

    # -- the merging thread ------------------------------------------------------------------------
    def others_pending(self) -> bool:
        for p in self.others:
            if p.pending:
                return True
        return False

    def inert_upto(self, chains: Chains, k: int, body: bytes, starts: np.ndarray, nl: np.ndarray, first: int) -> int:
        """The first record from k on (of k's chain) whose header the other parsers, in their
        state now, may act on (the chain's end when none): learnt for shapes not yet looked at."""
        stop = int(np.searchsorted(chains.head, chains.end[k], side="right"))
        hs = chains.hash[k:stop]
        fp = None
        bad = stop
        for h in np.unique(hs).tolist():
            if fp is None:
                fp = fingerprint(self.rest.parsers)
            if not self._inert(h, fp, chains, k + int(np.argmax(hs == h)), body, starts, nl, first):
                bad = min(bad, k + int(np.argmax(hs == h)))
        return bad

    def _inert(self, h: int, fp: tuple, chains: Chains, j: int, body: bytes, starts: np.ndarray, nl: np.ndarray,
               first: int) -> bool:
        mask = self.masks.get(h)
        if mask is not None:
            got = self.verdicts.get((h, self.shapes.pattern_now(mask, fp)))
            if got is not None:
                return got
        if len(self.verdicts) >= MAX_VERDICTS:
            return False
        i = int(chains.head[j])
        raw = bytes(body[int(starts[i]):int(nl[i])])
        text = line_text(raw)
        shapes = self.shapes
        twin = shapes._twin(self.rest)  # the others, in their state now
        try:
            items = twin.feed(text, first + i)
        except Exception:  # noqa: BLE001 - a parser failing on it: read per line, where it fails the same way
            items = None
        inert = False
        if items is not None and not twin.pending:
            after = fingerprint(twin.parsers)
            shapes._twin_cache = twin
            tpl = shapes._template(self.rest, raw, text, first + i, items, fp, after)
            inert = (tpl is not None and tpl.kind == "empty" and not tpl.dynamic
                     and not shapes._digit_literal_in(tpl.shape))
        if mask is None:
            mask = self.masks[h] = shapes._mask(text)
        self.verdicts[(h, shapes.pattern_key(mask, fp))] = inert
        return inert

