"""Line shapes: what the block reader learns from one line about every line that differs from it
only in its numbers, so that those lines never go through the per-line parsers (issue 17).

A line's *shape* is its bytes with each run of digits made one '1', whatever its length and
digits; its *zero shape* keeps the runs that are all zeros as they are (scan.c: `shape_of`;
`shape` here is the reference). Lines of one shape have the same bytes outside their digits and
runs of digits at the same places between them, so every literal a parser looks for, every regex
match and every token boundary falls at the same place of the shape in each: a place of the
shape maps to a place of each line by its runs (`runs`, `compact_at`, `locate`). A long run's
lines thus have a few shapes, however their numbers grow, shrink or turn zero.

The second time a line of a new shape reaches the parsers (not mid-record), `Shapes.learn`
looks at what they made of it, on variants of the line whose runs of digits are rewritten at
random, of other lengths too (fed to a copy of the parsers in the state before the line): two
with runs made zeros at random, one with all of them zeros, one with none; and, when that state
holds numbers, on the line itself under a state with other numbers:

- Every item must belong to that line, and each of its fields must be the same whatever the
  digits (a constant), exactly the number one token of the line reads as (`float(token)`), a
  slice of the line's text, or a number of the state before the line (an HF dict dated by the
  progress counter).
- The state after the line (`LineParser.state`) must be the state before it, with some numbers
  set from the line's tokens or constants (a progress counter: a *dynamic* shape, applied with
  `LineParser.set_state`). A line that leaves a record pending (the start of a multi-line
  record) is always read per line.
- When that fails but holds for the line's zero shape (variants whose runs of zeros stay, the
  others non-zero), what the parsers make of the shape's lines depends on which numbers are
  zero (a checkpoint loaded at iteration 0 is no resume): the shape is remembered as one whose
  lines are looked up by their zero shapes ("zero"), and the zero shape is learnt. So is a shape
  holding a literal with digits that a parser looks for.
- A shape that fails is remembered as read-per-line; one whose lines hold no trigger at all is
  remembered as quiet (skipped).

A line of a learnt shape is then read with no parser: scan.c finds its shape and reads its
tokens (exactly, or the line goes per line), and the items are made from the template while the
parsers' state has the pattern it was learnt under (`pattern`: numbers by sign and zero, other
values as they are). A single train record goes to the builder in columns (`Rows`; a step-less
one once the builder numbers such records); other items are made as objects. Only parsers that
look at digits through the numbers they read, whatever their length, take part (`DIGIT_BLIND`,
with literals that `shape_safe` accepts); a file read with any other parser (a declared format's
regex may test digit values) learns no shapes.
"""
from __future__ import annotations

import bisect
import copy
import math
import random
import re
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from precdx.collectors.logs.model import NUM_RE, Event, Record, Rows

MAX_SHAPES = 4096     # shapes learnt per file (read-per-line ones included)
MAX_SEEN = 1 << 16    # shapes seen once, remembered until learnt (then forgotten, and so on)
LEARN_FREE = 256      # shapes learnt before learning has to pay for itself:
LEARN_PAYS = 16       # lines read from learnt shapes per shape learnt
_RUN = re.compile(rb"[0-9]+")
_RUN_TEXT = re.compile(r"[0-9]+")
_DIGIT = re.compile(r"[0-9]")
_RECORD = [f.name for f in fields(Record) if f.name not in ("line", "extra")]
_EVENT = [f.name for f in fields(Event) if f.name != "line"]
# Rows columns read from a record's fields (the rest are flags: Table.flags)
_ROW_FIELDS = ("step", "loss", "grad_norm", "lr", "loss_scale", "skipped", "nan_iters")


def shape(line: bytes, zeros: bool = False) -> bytes:
    """A line's shape (bytes without the newline; a trailing CR dropped as the reader drops it):
    each run of digits made one '1'; its zero shape (`zeros`) keeps the runs of zeros as they are."""
    if line.endswith(b"\r"):
        line = line[:-1]
    if zeros:
        return _RUN.sub(lambda m: b"1" if m.group().strip(b"0") else m.group(), line)
    return _RUN.sub(b"1", line)


def runs(text, zeros: bool = False) -> list[tuple[int, int]]:
    """The runs of digits of a line (str or bytes) that its shape (its zero shape when `zeros`)
    makes one '1': (start, end) each."""
    pat = _RUN if isinstance(text, bytes) else _RUN_TEXT
    if not zeros:
        return [m.span() for m in pat.finditer(text)]
    zero = b"0" if isinstance(text, bytes) else "0"
    return [m.span() for m in pat.finditer(text) if m.group().strip(zero)]


def compact_at(rs: list[tuple[int, int]], pos: int) -> int | None:
    """Place `pos` of a line (`rs`: the runs its shape makes one '1', `runs`) in its shape; None
    when it falls inside such a run (no place of the shape stands for it in every line)."""
    return compactor(rs)(pos)


def compactor(rs: list[tuple[int, int]]):
    """`compact_at` for one line, for many places: the runs' ends and lengths summed once."""
    ends, cum, extra = [], [0], 0
    for a, b in rs:
        ends.append(b)
        extra += b - a - 1
        cum.append(extra)
    br = bisect.bisect_right

    def at(pos: int) -> int | None:
        k = br(ends, pos)  # runs ending at or before pos
        if k < len(rs) and rs[k][0] < pos:
            return None
        return pos - cum[k]
    return at


def locate(rs: list[tuple[int, int]], c: int) -> int:
    """Place `c` of a line's shape in the line (`rs`: the runs its shape makes one '1'): scan.c's
    `locate`."""
    return locator(rs)(c)


def locator(rs: list[tuple[int, int]]):
    """`locate` for one line, for many places: the runs' places in the shape worked out once."""
    starts, cum, extra = [], [0], 0
    for a, b in rs:
        starts.append(a - extra)
        extra += b - a - 1
        cum.append(extra)
    bl = bisect.bisect_left
    return lambda c: c + cum[bl(starts, c)]


def shape_safe(literal: str) -> bool:
    """Whether a literal a parser looks for is in every line of a shape or in none: true when
    each of its runs of digits is all zeros with a non-digit on both sides inside the literal
    (such a run is a whole run of the line, and shapes keep zeros); a literal without digits
    always is."""
    for m in _RUN_TEXT.finditer(literal):
        if m.group().strip("0") or m.start() == 0 or m.end() == len(literal):
            return False
    return True


def fingerprint(parsers) -> tuple:
    """The parsers' state, as far as it can change what they make of a later line (of those
    that keep any, in order)."""
    return tuple([p.state() for p in parsers if not (p.pure or p.stateless)])


def leaves(fp: tuple) -> list:
    """A fingerprint's values, flat (a parser whose state is a tuple gives one per element)."""
    out: list = []
    for v in fp:
        if isinstance(v, tuple):
            out.extend(v)
        else:
            out.append(v)
    return out


def unflatten(fp: tuple, flat: list) -> tuple:
    """A fingerprint shaped like `fp` holding the values `flat` (see `leaves`)."""
    out, i = [], 0
    for v in fp:
        if isinstance(v, tuple):
            out.append(tuple(flat[i:i + len(v)]))
            i += len(v)
        else:
            out.append(flat[i])
            i += 1
    return tuple(out)


def numeric(x) -> bool:
    """A number (not a bool)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def pattern(x):
    """What a shape read from the state (see Template.dynamic) needs of a state value: a number
    only by its sign and whether it is zero; anything else as it is."""
    if isinstance(x, tuple):
        return tuple(pattern(v) for v in x)
    if numeric(x):
        return "-" if x < 0 else "0" if x == 0 else "+"
    return x


@dataclass
class Template:
    """What the parsers make of every line of one shape (kind "lines": nothing learnt, such lines
    are read per line; "quiet": no parser looks at them, they hold none of the triggers)."""

    shape: bytes
    hash: int
    kind: str                            # "lines" | "quiet" | "empty" | "rows" | "hinted" | "items" | "zero"
    state: int = -1                      # the pattern of their state it was learnt under (Shapes.pattern_key)
    mask: int = 0                        # which parsers those are (Shapes.masks)
    tokens: tuple = ()                   # (byte offset, byte length) of the tokens it reads
    items: tuple = ()                    # per item: (class, {field: source}, {extra key: source})
    framework: str = ""
    cumulative: bool = False
    makers: list | None = None           # make_items' view of `items` (built on first use)
    state_reads: tuple | None = None     # the state values its items read, sorted (built on first use)
    row_form: bool | None = None         # its record can go in columns (blocks._rows_ok; on first use)
    slices: bool = False                 # some field is a slice of the line's text
    # A line that moves the parsers' state (a progress counter) or whose items read it (a record
    # dated by that counter): its lines are applied in order, the state carried from one to the
    # next (blocks._Reader._batch / _dynamic). `sets`:
    # (state value index, source) for each value it changes; a field's source may be
    # ("state", index): that value of the state before the line.
    dynamic: bool = False
    sets: tuple = ()
    # A zero shape (`shape` is one, tokens are placed in it); kind "zero": a shape whose lines are
    # looked up by their zero shapes (what the parsers make of them depends on which numbers
    # are zero).
    zeros: bool = False

    @property
    def reads(self) -> bool:
        return self.kind in ("empty", "rows", "hinted", "items")


class Table:
    """The learnt shapes as scan.c looks them up (built anew, never changed: the scan threads use
    the one they started with)."""

    def __init__(self, templates: list[Template]) -> None:
        self.templates = templates
        n = len(templates)
        size = 1
        while size < 2 * n + 2:
            size *= 2
        self.keys = np.zeros(size, dtype=np.uint64)
        self.vals = np.zeros(size, dtype=np.int32)
        self.mask = size - 1 if n else -1
        self._insert(templates, 0)
        self.skel = b"".join(t.shape for t in templates) or b"\0"
        self.skel_off = np.concatenate([[0], np.cumsum([len(t.shape) for t in templates])]).astype(np.int64)
        self.tok_off = np.concatenate([[0], np.cumsum([len(t.tokens) for t in templates])]).astype(np.int64)
        toks = [tok for t in templates for tok in t.tokens]
        self.tok_at = np.array([a for a, _ in toks] or [0], dtype=np.int64)
        self.tok_len = np.array([n for _, n in toks] or [0], dtype=np.int64)
        self.width = max([len(t.tokens) for t in templates] or [0])
        self.reads = np.array([t.reads for t in templates] or [False], dtype=bool)
        self.redirect = np.array([t.kind == "zero" for t in templates] or [False], dtype=np.uint8)
        self.zshape = np.array([t.zeros for t in templates] or [False], dtype=np.uint8)
        self.quiet = np.array([t.kind == "quiet" for t in templates] or [False], dtype=bool)
        self.state = np.array([t.state for t in templates] or [-1], dtype=np.int64)
        self.maskid = np.array([t.mask for t in templates] or [0], dtype=np.int64)
        self.as_rows = np.array([t.kind == "rows" for t in templates] or [False], dtype=bool)
        self.hinted = np.array([t.kind == "hinted" for t in templates] or [False], dtype=bool)
        self.objects = np.array([t.kind in ("items", "hinted") for t in templates] or [False], dtype=bool)
        self.dynamic = np.array([t.dynamic for t in templates] or [False], dtype=bool)
        self.transition = np.array([bool(t.sets) for t in templates] or [False], dtype=bool)
        self.has_items = np.array([bool(t.items) for t in templates] or [False], dtype=bool)
        # Rows columns per shape: the token read (-1: none) and the constant otherwise.
        self.src: dict[str, np.ndarray] = {}
        self.const: dict[str, np.ndarray] = {}
        columnar = ("rows", "hinted")
        self.extras: list[str] = sorted({k for t in templates if t.kind in columnar for k in t.items[0][2]})
        names = list(_ROW_FIELDS) + [f"extra:{k}" for k in self.extras]
        for name in names:
            src = np.full(max(n, 1), -1, dtype=np.int64)
            const = np.full(max(n, 1), np.nan)
            for t, tpl in enumerate(templates):
                if tpl.kind not in columnar:
                    continue
                _, attrs, extra = tpl.items[0]
                if name == "step" and tpl.kind == "hinted":
                    how = attrs["step_hint"]
                else:
                    how = extra.get(name[6:]) if name.startswith("extra:") else attrs.get(name)
                if how is None:
                    continue
                if how[0] == "tok":
                    src[t] = how[1]
                elif how[1] is not None:
                    const[t] = float(how[1])
            self.src[name], self.const[name] = src, const
        flag = {"has_loss": lambda a: a["loss"] != ("const", None),
                "has_grad_norm": lambda a: a["grad_norm"] != ("const", None),
                "loss_missing": lambda a: bool(a["loss_missing"][1])}
        self.flags = {k: np.array([f(t.items[0][1]) if t.kind in columnar else False for t in templates]
                                  or [False], dtype=bool) for k, f in flag.items()}

    def _insert(self, templates: list[Template], first: int) -> None:
        """Put `templates` (numbered from `first`) in the open-addressing table."""
        for t, tpl in enumerate(templates, first):
            slot = tpl.hash & self.mask
            while self.keys[slot]:
                slot = (slot + 1) & self.mask
            self.keys[slot] = tpl.hash
            self.vals[slot] = t

    _PER_SHAPE = ("reads", "redirect", "zshape", "quiet", "state", "maskid", "as_rows", "hinted", "objects",
                  "dynamic", "transition", "has_items")

    @classmethod
    def grow(cls, prev: "Table", templates: list[Template]) -> "Table":
        """The table of `templates`, whose first ones are `prev`'s: prev's arrays with the new
        shapes' appended (what learning a few shapes in a big table costs), or built anew when
        prev is empty, has no room left or the new shapes read other extra columns."""
        n0, n = len(prev.templates), len(templates)
        new = templates[n0:]
        if not new or n0 == 0 or 2 * n + 2 > prev.keys.size or templates[n0 - 1] is not prev.templates[-1]:
            return cls(templates)
        columnar = ("rows", "hinted")
        if {k for t in new if t.kind in columnar for k in t.items[0][2]} - set(prev.extras):
            return cls(templates)
        part = cls(new)
        self = cls.__new__(cls)
        self.templates = templates
        self.keys, self.vals, self.mask = prev.keys.copy(), prev.vals.copy(), prev.mask
        self._insert(new, n0)
        self.skel = prev.skel + part.skel
        self.skel_off = np.concatenate([prev.skel_off, part.skel_off[1:] + prev.skel_off[-1]])
        self.tok_off = np.concatenate([prev.tok_off, part.tok_off[1:] + prev.tok_off[-1]])
        k0, k1 = int(prev.tok_off[-1]), int(part.tok_off[-1])  # (an empty token list holds one 0)
        self.tok_at = np.concatenate([prev.tok_at[:k0], part.tok_at[:k1]]) if k0 + k1 else prev.tok_at
        self.tok_len = np.concatenate([prev.tok_len[:k0], part.tok_len[:k1]]) if k0 + k1 else prev.tok_len
        self.width = max(prev.width, part.width)
        for name in cls._PER_SHAPE:
            setattr(self, name, np.concatenate([getattr(prev, name)[:n0], getattr(part, name)]))
        self.extras = prev.extras
        self.src, self.const = {}, {}
        for name in prev.src:
            src = part.src.get(name)
            self.src[name] = np.concatenate([prev.src[name][:n0], src if src is not None else np.full(len(new), -1)])
            const = part.const.get(name)
            self.const[name] = np.concatenate([prev.const[name][:n0],
                                               const if const is not None else np.full(len(new), np.nan)])
        self.flags = {k: np.concatenate([v[:n0], part.flags[k]]) for k, v in prev.flags.items()}
        return self


class Shapes:
    """The shapes learnt in one file, and what the parsers' states were when they were learnt."""

    def __init__(self, dispatcher, kern=None) -> None:
        self.kern = kern
        self.templates: list[Template] = []
        # shapes whose lines are looked up by their zero shapes
        self.zero_shapes: set[bytes] = set()
        # the literals parsers look for that hold digits, as they read in a shape: a shape that
        # holds one is another line's shape too that holds another number there
        self._digit_literals = sorted({shape(t.encode()) for p in dispatcher.parsers
                                       for t in (*p.hints, *(p.triggers or ())) if _DIGIT.search(t)})
        self.learnt = 0       # shapes learnt from the parsers (quiet ones not counted)
        self.hits = 0         # lines read from learnt shapes (the block reader counts them)
        self.known: set[int] = set()
        self.seen: set[int] = set()
        self.table = Table([])
        self._dirty = False
        self._rng = random.Random(1729)
        self._pool = "".join(self._rng.choices("0123456789", k=8192))
        self._twin_cache = None
        self._silent = np.zeros(0, dtype=np.uint64)  # shapes of trigger-less lines seen once
        # What a line of a shape depends on: the state of the parsers it is fed to (every parser
        # without hints, those whose hints it holds, the fallback ones; the same for every line
        # of the shape, hints holding no digit). A mask is such a set of parsers (indices).
        index = {id(p): j for j, p in enumerate(dispatcher.parsers)}
        self._always = [index[id(p)] for p in dispatcher.always] + [index[id(p)] for p, _ in dispatcher.fallback]
        self._hinted = [(index[id(p)], hints) for p, hints in dispatcher.hinted]
        keeping = [j for j, p in enumerate(dispatcher.parsers) if not (p.pure or p.stateless)]
        self._at = {j: k for k, j in enumerate(keeping)}  # parser index -> place in a fingerprint
        self.masks: list[tuple[int, ...]] = []  # (places in a fingerprint)
        self._mask_ids: dict[tuple[int, ...], int] = {}
        self._keys: dict[Any, int] = {}  # (mask, the pattern of its parsers' states) -> key
        self._next = 0
        self._pfp: tuple | None = None     # the fingerprint `_pnow` holds the pattern keys of
        self._pnow: dict[int, int] = {}    # mask -> pattern key, under _pfp

    def pattern_key(self, mask: int, fp: tuple) -> int:
        """The key of the pattern of state `fp` (numbers by sign and zero, `pattern`) for the
        parsers of mask `mask`: a learnt shape holds while the key of its mask is the one it was
        learnt under (what it makes of a line was checked under a state with other numbers too)."""
        return self._intern(("pattern", mask, tuple(pattern(fp[j]) for j in self.masks[mask])))

    def pattern_now(self, mask: int, fp: tuple) -> int:
        """`pattern_key`, cached for the last fingerprint asked for."""
        if fp is not self._pfp:
            self._pfp, self._pnow = fp, {}
        got = self._pnow.get(mask)
        if got is None:
            got = self._pnow[mask] = self.pattern_key(mask, fp)
        return got

    def _intern(self, k) -> int:
        got = self._keys.get(k)
        if got is None:
            if len(self._keys) >= MAX_SEEN:  # keys never come back under another meaning
                self._keys.clear()
            got = self._keys[k] = self._next
            self._next += 1
        return got

    def _mask(self, text: str) -> int:
        fed = self._always + [j for j, hints in self._hinted if any(h in text for h in hints)]
        m = tuple(sorted(self._at[j] for j in fed if j in self._at))
        got = self._mask_ids.get(m)
        if got is None:
            got = self._mask_ids[m] = len(self.masks)
            self.masks.append(m)
        return got

    @property
    def full(self) -> bool:
        return len(self.templates) >= MAX_SHAPES

    def publish(self) -> None:
        """Make what was learnt visible to the scans that start from now on."""
        if self._dirty:
            self.table = Table.grow(self.table, list(self.templates))
            self._dirty = False

    def should_learn(self, h: int) -> bool:
        """A line of shape hash `h` (unknown to the table) reached the parsers: learn from it when
        its shape was seen before (a shape seen once may never come back: learning costs more than
        reading one line)."""
        if not h or h in self.known or self.full:
            return False
        if h in self.seen:
            # Learning costs ~0.5 ms: past the first LEARN_FREE shapes, only while the learnt
            # ones pay (a log of many shapes, each coming back a few times, stops learning).
            return self.learnt < LEARN_FREE or self.hits >= LEARN_PAYS * self.learnt
        if len(self.seen) >= MAX_SEEN:
            self.seen.clear()
        self.seen.add(h)
        return False

    def silent(self, hashes: np.ndarray, lines: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Of lines of new shapes that hold no trigger (`lines`, with their shape `hashes`), one
        line of each shape seen before: shapes to remember as quiet (`quiet`), so that their lines
        are no longer searched for triggers."""
        hashes, first = np.unique(hashes, return_index=True)
        keep = hashes != 0
        hashes, first = hashes[keep], first[keep]
        again = np.isin(hashes, self._silent)
        if self._silent.size + hashes.size - int(np.count_nonzero(again)) > MAX_SEEN:
            self._silent = self._silent[:0]
        self._silent = np.union1d(self._silent, hashes[~again])
        room = 0 if self.full else MAX_SHAPES - len(self.templates)
        pick = first[again][:room]
        return lines[pick], hashes[again][:room]

    def zero_hash(self, raw: bytes) -> int:
        """The hash of the zero shape of `raw`, as scan.c works it out."""
        kern = self.kern
        if kern is None:
            from precdx.collectors.logs import native
            kern = self.kern = native.kernels()
        if kern is None:  # (only when no kernels: then no table is ever looked up)
            return hash(shape(raw, True)) & 0xFFFFFFFFFFFFFFF or 1
        return int(kern.shape_hash(raw, len(raw), 1))

    def _redirect(self, raw: bytes, h: int) -> int:
        """Look the lines of the shape of `raw` (hash `h`) up by their zero shapes from now on;
        returns the hash of the zero shape of `raw`."""
        d = shape(raw)
        self.zero_shapes.add(d)
        self.templates.append(Template(d, h, "zero"))
        return self.zero_hash(raw)

    def _digit_literal_in(self, sh: bytes) -> bool:
        return any(lit in sh for lit in self._digit_literals)

    def quiet(self, raw: bytes, h: int) -> None:
        """Remember the shape of `raw` (shape hash `h`, of its zero shape when its shape is looked
        up by zero shapes), a line holding no trigger, as quiet. A shape that holds a literal with
        digits is another line's too that holds the literal: its zero shapes are remembered."""
        if h in self.known:
            return
        self.known.add(h)
        self._dirty = True
        zeros = shape(raw) in self.zero_shapes
        if not zeros and self._digit_literal_in(shape(raw)):
            h = self._redirect(raw, h)
            self.known.add(h)
            zeros = True
        self.templates.append(Template(shape(raw, zeros), h, "quiet", zeros=zeros))

    def learn(self, dispatcher, raw: bytes, text: str, lineno: int, items: list, before: tuple, after: tuple,
              h: int) -> None:
        """`items`: what `dispatcher` made of line `lineno` (`raw` its bytes, `text` as the parsers
        got it), its parsers' state having been `before` and now being `after` (fingerprints)."""
        self.seen.discard(h)
        self.known.add(h)
        self.learnt += 1
        self._dirty = True
        tpl = None
        zeros = shape(raw) in self.zero_shapes  # `h` is then the zero shape's
        if not dispatcher.pending:
            tpl = self._template(dispatcher, raw, text, lineno, items, before, after, zeros)
            if not zeros and (tpl is None or self._digit_literal_in(tpl.shape)):
                # what the parsers make of its lines may depend on which numbers are zero
                ztpl = self._template(dispatcher, raw, text, lineno, items, before, after, True)
                if ztpl is not None:
                    h = self._redirect(raw, h)
                    self.known.add(h)
                    self.seen.discard(h)
                    tpl, zeros = ztpl, True
                else:
                    tpl = None  # (a shape holding such a literal is read per line then)
        if tpl is None:
            tpl = Template(shape(raw, zeros), h, "lines", zeros=zeros)
        tpl.hash = h
        tpl.mask = self._mask(text)
        tpl.state = self.pattern_key(tpl.mask, before)
        self.templates.append(tpl)

    # -- learning ------------------------------------------------------------------------------
    def _template(self, dispatcher, raw: bytes, text: str, lineno: int, items: list, before: tuple,
                  after: tuple, zeros: bool = False) -> Template | None:
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        if text.encode("utf-8") != raw:
            return None  # undecodable bytes: offsets would not be byte offsets
        if any(it.line != lineno for it in items):
            return None  # an item of another line (a record completed here)
        tokens, covered = [], 0
        for m in NUM_RE.finditer(text):
            digits = _DIGIT.findall(m.group())
            covered += len(digits)
            if not digits:
                continue
            try:
                float(m.group())
            except ValueError:  # NeMo's "nan.0": the same in every line of the shape if all zeros
                if any(d != "0" for d in digits):
                    return None
                continue
            tokens.append(m)
        if covered != len(_DIGIT.findall(text)):
            return None  # a digit outside every number (never seen; the variants would not test it)
        values = [[float(m.group()) for m in tokens]]
        # the tokens' places in the shape (of the text: for the variants; of the bytes: for scan.c)
        t_runs, b_runs = runs(text, zeros), runs(raw, zeros)
        cat = compactor(t_runs)
        spans = [(cat(m.start()), cat(m.end())) for m in tokens]
        if any(a is None or b is None for a, b in spans):
            return None
        # (a shape: two with runs made zeros at random, one with all zeros, one with none)
        digit_runs = _token_runs(text, tokens)
        variants = ([self._variant(text, digit_runs, True) for _ in range(2)] if zeros else
                    [self._variant(text, digit_runs, False, p) for p in (0.5, 0.5, 1.0, 0.0)])
        if any(v is None for v in variants):
            return None
        # What the parsers make of each variant from the state before the line, and of the line
        # itself from that state with its numbers changed (when the line moves the state or an
        # item reads it, both must follow from the line and the state before it).
        twin = self._twin(dispatcher)
        self._twin_cache = None  # (given back below unless a run leaves it mid-record or failing)
        keeping = [p for p in twin.parsers if not (p.pure or p.stateless)]
        flat0 = leaves(before)
        other = [(x + 1 + self._rng.randrange(1000)) * (1 if x >= 0 else -1) if type(x) is int
                 else x * (1.5 + self._rng.random()) if type(x) is float else x for x in flat0]
        fed = [(v, before) for v in variants]
        if other != flat0:
            fed.append((text, unflatten(before, other)))
        got, ends = [], []
        for v, start in fed:
            try:
                restore(keeping, start)
                out = twin.feed(v, lineno)
            except Exception:  # noqa: BLE001 - a parser failing on a variant, or whose state cannot be set
                return None
            if twin.pending:
                return None
            got.append(out)
            ends.append(fingerprint(twin.parsers))
        self._twin_cache = twin
        n_leaves = len(flat0)
        if (any(len(out) != len(items) for out in got) or len(leaves(after)) != n_leaves
                or any(len(leaves(e)) != n_leaves for e in ends)):
            return None
        for v, _ in fed:
            loc = locator(runs(v, zeros))
            try:
                values.append([float(v[loc(a):loc(b)]) for a, b in spans])
            except ValueError:
                return None
        texts = [text] + [v for v, _ in fed]
        states = [flat0] + [leaves(start) for _, start in fed]
        used: dict[int, int] = {}  # token index -> column
        specs = []
        for group in zip(items, *got):
            spec = _item_spec(group, texts, values, used, states, zeros)
            if spec is None:
                return None
            specs.append(spec)
        # the state after the line: each value kept, or set from the line (or a constant)
        sets = []
        for j, vals in enumerate(zip(leaves(after), *(leaves(e) for e in ends))):
            if all(_same(v, st[j]) for v, st in zip(vals, states)):
                continue  # kept
            how = _source(vals, texts, values, used, None, zeros)
            if how is None or how[0] == "slice":
                return None
            sets.append((j, how))
        dynamic = bool(sets) or any(how[0] == "state" for _, attrs, extra in specs
                                    for how in (*attrs.values(), *extra.values()))
        if not dynamic and after != before:
            return None
        offsets = []
        bat = compactor(b_runs)
        for k in sorted(used, key=used.get):
            a = bat(len(text[:tokens[k].start()].encode("utf-8")))
            b = bat(len(text[:tokens[k].end()].encode("utf-8")))
            if a is None or b is None:
                return None
            offsets.append((a, b - a))
        offsets = tuple(offsets)
        if not items:
            if not dynamic:
                return Template(shape(raw, zeros), 0, "empty", zeros=zeros)
            return Template(shape(raw, zeros), 0, "items", tokens=offsets, dynamic=True, sets=tuple(sets), zeros=zeros)
        kind = "items"
        if len(items) == 1 and isinstance(items[0], Record) and not dynamic:
            attrs = specs[0][1]
            if (items[0].kind == "train" and attrs["kind"][0] == attrs["framework"][0] == "const"
                    and all(how[0] in ("const", "tok") for how in attrs.values())):
                if attrs["step"] != ("const", None) and attrs["step_hint"] == ("const", None):
                    kind = "rows"
                elif attrs["step"] == ("const", None) and attrs["step_hint"][0] == "const":
                    kind = "hinted"  # no step printed: in columns once the builder numbers them
        rec = items[0]
        return Template(shape(raw, zeros), 0, kind, tokens=offsets, items=tuple(specs), zeros=zeros,
                        framework=rec.framework if isinstance(rec, Record) else "",
                        cumulative=bool(rec.skipped_cumulative) if isinstance(rec, Record) else False,
                        slices=any(how[0] == "slice" for _, attrs, _ in specs for how in attrs.values()),
                        dynamic=dynamic, sets=tuple(sets))

    def _twin(self, dispatcher):
        """A copy of `dispatcher` to feed variants to, in its state (kept from one learning to the
        next and put in the state of the day; copied anew when it cannot be)."""
        twin = self._twin_cache
        if twin is not None:
            try:
                for tp, p in zip(twin.parsers, dispatcher.parsers):
                    if not (p.pure or p.stateless):
                        now = p.state()
                        if tp.state() != now:
                            tp.set_state(now)
                return twin
            except Exception:  # noqa: BLE001 - a parser whose state cannot be set: copy
                pass
        return copy.deepcopy(dispatcher)

    def _variant(self, text: str, digit_runs: list, zeros: bool, p_zero: float = 0.5) -> str | None:
        """`text` with the runs of digits of its tokens (`digit_runs`, `_token_runs`) rewritten at
        random, each to a length drawn from 1 to 3 more than its own (an exponent's: 1 or 2), so
        that what is checked holds whatever the numbers' widths. For a zero shape (`zeros`), runs of
        zeros are kept and the others stay non-zero; else each run is made zeros with probability
        `p_zero` (0: none), so that it holds whatever numbers are zero."""
        parts, last = [], 0
        rnd = self._rng.random
        pool, size = self._pool, len(self._pool) - 32
        for a, b, digits, exponent in digit_runs:
            if zeros and not digits.strip("0"):
                continue
            w = (1 + int(rnd() * 2)) if exponent else (1 + int(rnd() * (b - a + 3)))
            if not zeros and rnd() < p_zero:
                new = "0" * w
                if new == digits:
                    new += "0"
            else:
                at = int(rnd() * size)
                new = pool[at:at + w]  # random digits
                if not new.strip("0"):
                    new = new[:-1] + "7"
                if new == digits:
                    new = new[:-1] + ("1" if new[-1] != "1" else "2")
            parts += [text[last:a], new]
            last = b
        parts.append(text[last:])
        return "".join(parts)


def _token_runs(text: str, tokens: list) -> list[tuple[int, int, str, bool]]:
    """The runs of digits of `tokens` (matches in `text`): (start, end, digits, in an exponent)."""
    out = []
    for m in tokens:
        for run in _RUN_TEXT.finditer(text, m.start(), m.end()):
            a = run.start()
            exponent = text[a - 1:a] in ("e", "E") or (text[a - 1:a] in ("+", "-") and text[a - 2:a - 1] in ("e", "E"))
            out.append((a, run.end(), run.group(), exponent))
    return out


def _same(a, b) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return a == b


def _source(vals: tuple, texts: list[str], values: list[list[float]], used: dict[int, int],
            states: list[list] | None = None, zeros: bool = False):
    """How a field's value (in the line and its variants) follows from the line or the state
    before it: ("const", v), ("tok", column, is_int), ("slice", start, end) or ("state", index);
    None when it does not."""
    a = vals[0]
    if all(_same(a, v) for v in vals[1:]):
        return ("const", a)
    if isinstance(a, bool) or a is None or any(type(v) is not type(a) for v in vals):
        return None
    if isinstance(a, (int, float)):
        want = [float(v) for v in vals]
        w0, row0 = want[0], values[0]
        hits = [k for k in range(len(row0))
                if row0[k] == w0 and all(values[i][k] == want[i] for i in range(1, len(want)))]
        from_state = [j for j in range(len(states[0]))
                      if all(numeric(st[j]) and st[j] == v for st, v in zip(states, vals))] if states else []
        if len(hits) + len(from_state) != 1:
            return None
        if from_state:
            return ("state", from_state[0])
        col = used.setdefault(hits[0], len(used))
        return ("tok", col, isinstance(a, int))
    if isinstance(a, str):
        at = texts[0].find(a)
        if at < 0:
            return None
        rs = runs(texts[0], zeros)
        ca, cb = compact_at(rs, at), compact_at(rs, at + len(a))
        if ca is None or cb is None:
            return None
        for t, v in zip(texts[1:], vals[1:]):
            rt = runs(t, zeros)
            if t[locate(rt, ca):locate(rt, cb)] != v:
                return None
        return ("slice", ca, cb)  # places in the shape (of the text)
    return None


def _item_spec(group: tuple, texts: list[str], values: list[list[float]], used: dict[int, int],
               states: list[list] | None = None, zeros: bool = False):
    first = group[0]
    if any(type(it) is not type(first) for it in group):
        return None
    names = _RECORD if isinstance(first, Record) else _EVENT
    attrs = {}
    for name in names:
        how = _source(tuple(getattr(it, name) for it in group), texts, values, used, states, zeros)
        if how is None:
            return None
        attrs[name] = how
    extra = {}
    if isinstance(first, Record):
        keys = list(first.extra)
        if any(list(it.extra) != keys for it in group):
            return None
        for key in keys:
            how = _source(tuple(it.extra[key] for it in group), texts, values, used, states, zeros)
            if how is None or how[0] == "slice":
                return None
            extra[key] = how
    return (type(first), attrs, extra)


def make_items(tpl: Template, line: int, row: np.ndarray, text: str | None, state: list | None = None) -> list:
    """The items of one line of a learnt shape (`row`: its tokens as read; `text`: the line, for
    fields that are slices of it; `state`: the parsers' state before it, flat, for a dynamic one)."""
    makers = tpl.makers
    if makers is None:
        makers = tpl.makers = [_maker(spec) for spec in tpl.items]
    vals = row.tolist()
    rs = runs(text, tpl.zeros) if tpl.slices else None
    out = []
    for cls, const, toks, cuts, reads, extra_const, extra_toks, extra_reads in makers:
        kw = dict(const)
        kw["line"] = line
        for name, col, whole in toks:
            v = vals[col]
            kw[name] = int(v) if whole else v
        for name, a, b in cuts:
            kw[name] = text[locate(rs, a):locate(rs, b)]
        for name, j in reads:
            kw[name] = state[j]
        if extra_const or extra_toks or extra_reads:
            extra = dict(extra_const)
            for name, col, whole in extra_toks:
                v = vals[col]
                extra[name] = int(v) if whole else v
            for name, j in extra_reads:
                extra[name] = state[j]
            kw["extra"] = extra
        out.append(cls(**kw))
    return out


def next_state(tpl: Template, row: np.ndarray, state: list) -> list:
    """The parsers' state (flat) after a line of dynamic shape `tpl` (`state`: before it)."""
    new = list(state)
    vals = row.tolist()
    for j, how in tpl.sets:
        if how[0] == "const":
            new[j] = how[1]
        elif how[0] == "tok":
            v = vals[how[1]]
            new[j] = int(v) if how[2] else v
        else:
            new[j] = state[how[1]]
    return new


def restore(parsers: list, fp: tuple) -> None:
    """Put `parsers` (those that keep state, in fingerprint order) in the state `fp`."""
    for p, v in zip(parsers, fp):
        if p.state() != v:
            p.set_state(v)


def _maker(spec: tuple) -> tuple:
    """An item's spec split for `make_items`: constants, token fields, slices, and the same for
    its extra values."""
    cls, attrs, extra = spec
    return (cls, {k: how[1] for k, how in attrs.items() if how[0] == "const"},
            [(k, how[1], how[2]) for k, how in attrs.items() if how[0] == "tok"],
            [(k, how[1], how[2]) for k, how in attrs.items() if how[0] == "slice"],
            [(k, how[1]) for k, how in attrs.items() if how[0] == "state"],
            {k: how[1] for k, how in extra.items() if how[0] == "const"},
            [(k, how[1], how[2]) for k, how in extra.items() if how[0] == "tok"],
            [(k, how[1]) for k, how in extra.items() if how[0] == "state"])


def rows_of(table: Table, framework: str, lines: np.ndarray, tids: np.ndarray, vals: np.ndarray,
            cumulative: bool, at: np.ndarray | None = None) -> Rows:
    """The records of lines of learnt "rows" (and "hinted") shapes, in columns (`lines`: 1-based, in order;
    `vals`: their tokens as read, a row per line, or the rows `at` of `vals` when given: only the
    columns a record reads are taken from it)."""
    m = lines.size
    cols = {}
    present = np.flatnonzero(np.bincount(tids)) if m else np.zeros(0, dtype=np.int64)  # (the shapes among them)
    r = None
    for name, src in table.src.items():
        ss = src[present]
        if ss.size and (ss == ss[0]).all():  # every shape reads it from one token, or none does
            s = int(ss[0])
            if s >= 0:
                cols[name] = vals[:, s].copy() if at is None else vals[:, s][at]  # (column, then rows: 3x faster)
                continue
            const = table.const[name][present]
            if (const.view(np.int64) == const[:1].view(np.int64)).all():  # (one constant, NaN too)
                cols[name] = np.full(m, const[0])
                continue
        if r is None:
            r = np.arange(m) if at is None else at
        s = src[tids]
        v = table.const[name][tids]
        got = s >= 0
        if got.any():
            v = v.copy()
            v[got] = vals[r[got], s[got]]
        cols[name] = v
    extra = {}
    for k in table.extras:
        v = cols[f"extra:{k}"]
        if not np.isnan(v).all() or (table.src[f"extra:{k}"][tids] >= 0).any():
            extra[k] = v
    def per_line(a: np.ndarray) -> np.ndarray:  # (one shape, the usual block: its flag throughout)
        return np.full(m, a[present[0]]) if present.size == 1 else a[tids]

    hinted = per_line(table.hinted)
    flags = table.flags
    return Rows(framework, lines, cols["step"], cols["loss"], per_line(flags["has_loss"]),
                per_line(flags["loss_missing"]), cols["grad_norm"], per_line(flags["has_grad_norm"]), cols["lr"],
                cols["loss_scale"], cols["skipped"], cols["nan_iters"], cumulative, extra,
                hinted if hinted.any() else None)
