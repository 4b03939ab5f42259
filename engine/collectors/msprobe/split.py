"""One dump pair compared on every core: both files are cut at the same entry names into
`parts` aligned byte ranges, a worker process compares each pair of ranges (reading with
`fastread.RangeReader`), and the parts are merged into exactly the `PassResult` of the one-pass
`comparison.compare_dumps`.

Why ranges and not one process per side: the comparison needs both sides' entries in one place,
and shipping every entry between processes costs nearly as much as building it. Aligned ranges
exchange only the few entries that did not find their partner inside their range.

Exactness. The one-pass comparison streams both files in lock step; its result depends on that
order only through (a) the comparison mode, fixed by the first pair it compares, (b) which
entries pair by name, (c) the earliest candidates, counters and indices, and (d) whether the
twin of the run's first Inf/NaN entry is abnormal, taken at the time that pair is compared.
Here (a) is found first by streaming the two file heads the same way, (b) is the same whenever
no name repeats on a side (checked; a repeat falls back), (c) merges by global entry index,
and (d) is replayed from the global indices of the pairs (entry i of the run is read at step i,
entry j of the other dump just after entry j of the run). Anything the range reader cannot
vouch for (see fastread), a range that does not end at an entry boundary, or too many entries
left without a partner, falls back to `compare_dumps`.
"""
from __future__ import annotations

import multiprocessing
import re
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from precdx.collectors.msprobe.comparison import (
    Candidate, PassResult, SideScan, _fallback, _Pass, compare_dumps)
from precdx.collectors.msprobe.dumpdir import DumpHeader, read_header
from precdx.collectors.msprobe.entries import Entry, EntryIssues, build_entry
from precdx.collectors.msprobe.executor import cpu_count
from precdx.collectors.msprobe.fastread import RangeReader, Unsupported
from precdx.collectors.msprobe.intindex import IntIndex
from precdx.collectors.msprobe.naming import parse_entry_name

# Below this combined size a pair is compared in one pass (starting processes costs more).
SPLIT_MIN_BYTES = 48 << 20
# A part with more unpaired entries than this falls back (the parts would ship too much).
MAX_LEFTOVERS = 20_000
_PRESCAN_STEPS = 4096
_WINDOW = 1 << 20
_CUT = re.compile(rb'\}[ \t\n\r]*(,)[ \t\n\r]*"([^"\\]{1,4096})"[ \t\n\r]*:[ \t\n\r]*\{')


def _fork_context():
    try:
        return multiprocessing.get_context("fork")
    except ValueError:   # no fork on this platform: tensor keys hash strings, workers must share the seed
        return None


# ---------------------------------------------------------------- where to cut
def _find_cut(fh, start: int, stop: int) -> tuple[int, bytes] | None:
    """(offset of the comma, entry name) of the first entry boundary candidate at or after
    `start` and before `stop` (a candidate only: the range readers prove it)."""
    pos = start
    while pos < stop:
        fh.seek(pos)
        blob = fh.read(_WINDOW + 8192)
        if not blob:
            return None
        for m in _CUT.finditer(blob):
            if pos + m.start(1) >= stop:
                return None
            # a name that reads as an entry (not a kwarg or parameter inside one)
            if parse_entry_name(m.group(2).decode("utf-8", "replace")).direction != "unknown":
                return pos + m.start(1), m.group(2)
        pos += _WINDOW
    return None


def _find_name(fh, name: bytes, around: int, size: int, after: int) -> int | None:
    """Offset of the comma before entry `name` in the other file, searching outward from `around`."""
    needle = re.compile(rb'\}[ \t\n\r]*(,)[ \t\n\r]*"' + re.escape(name) + rb'"[ \t\n\r]*:[ \t\n\r]*\{')
    span = 4 * _WINDOW
    while True:
        lo, hi = max(after, around - span), min(size, around + span)
        fh.seek(lo)
        blob = fh.read(hi - lo + 8192)
        best = None
        for m in needle.finditer(blob):
            off = lo + m.start(1)
            if off > after and (best is None or abs(off - around) < abs(best - around)):
                best = off
        if best is not None:
            return best
        if lo <= after and hi >= size:
            return None
        span *= 4


def plan_cuts(run_path: Path, against_path: Path, parts: int) -> list[tuple[int, int]]:
    """Up to parts-1 pairs of comma offsets (run, against) cutting both files before the same
    entry name, increasing in both files."""
    size_a, size_b = run_path.stat().st_size, against_path.stat().st_size
    cuts: list[tuple[int, int]] = []
    last_a = last_b = 0
    with run_path.open("rb") as fa, against_path.open("rb") as fb:
        for k in range(1, parts):
            target = max(last_a + 1, size_a * k // parts)
            found = _find_cut(fa, target, size_a)
            tries = 0
            while found is not None and tries < 8:
                off_a, name = found
                off_b = _find_name(fb, name, size_b * off_a // max(size_a, 1), size_b, last_b)
                if off_b is not None:
                    cuts.append((off_a, off_b))
                    last_a, last_b = off_a, off_b
                    break
                found = _find_cut(fa, off_a + 1, size_a)
                tries += 1
    return cuts


# ---------------------------------------------------------------- the first pair fixes the mode
def _first_mode(run_path: Path, against_path: Path, exact: bool, skip_modules: bool) -> str | None:
    """The mode the one-pass comparison takes from its first compared pair (None: no pair in
    the first steps, or the heads cannot be read here)."""
    probe = _Pass(SideScan(run_path, DumpHeader()), SideScan(against_path, DumpHeader()), exact)
    pending_a: dict[str, Entry] = {}
    pending_b: dict[str, Entry] = {}
    it_a = RangeReader(run_path).entries()
    it_b = RangeReader(against_path).entries()
    live_a = live_b = True
    try:
        for step in range(_PRESCAN_STEPS):
            if not (live_a or live_b):
                return None
            for side in (0, 1):
                if side == 0 and not live_a or side == 1 and not live_b:
                    continue
                item = next(it_a if side == 0 else it_b, None)
                if item is None:
                    if side == 0:
                        live_a = False
                    else:
                        live_b = False
                    continue
                e = build_entry(item[0], item[1], step)
                if skip_modules and e.name.is_module:
                    continue
                mine, theirs = (pending_a, pending_b) if side == 0 else (pending_b, pending_a)
                other = theirs.pop(e.name.full, None)
                if other is None:
                    mine[e.name.full] = e
                    continue
                a, b = (e, other) if side == 0 else (other, e)
                return probe.mode_for(a, b)
    except Unsupported:
        return None
    finally:
        it_a.close()
        it_b.close()
    return None


# ---------------------------------------------------------------- one part
@dataclass(frozen=True)
class PartTask:
    run_path: str
    run_range: tuple[int, int | None]
    against_path: str
    against_range: tuple[int, int | None]
    exact: bool
    mode: str
    skip_modules: bool


@dataclass
class ScanPart:
    """A SideScan's state over one range, entry orders local to the range."""

    entries: int = 0
    apis: int = 0
    modules: int = 0
    nonfinite: int = 0
    first_abnormal: Entry | None = None
    first_abnormal_module: Entry | None = None
    abnormal_param_shapes: set = field(default_factory=set)
    param_keys: tuple = ()
    producers: tuple = ()
    first_order: int | None = None
    first_loss_order: int | None = None
    first_backward_order: int | None = None
    issue_counts: dict = field(default_factory=dict)
    issue_first: dict = field(default_factory=dict)
    modes: dict = field(default_factory=dict)
    name_hashes: Any = None


@dataclass
class PartResult:
    ok: bool
    why: str = ""
    run: ScanPart | None = None
    against: ScanPart | None = None
    n_compared: int = 0
    n_error: int = 0
    n_warning: int = 0
    n_diverged: int = 0
    max_out_err: float = 0.0
    first: Candidate | None = None
    first_module: Candidate | None = None
    weak_outputs: dict = field(default_factory=dict)
    left_a: list = field(default_factory=list)
    left_b: list = field(default_factory=list)
    twins: dict = field(default_factory=dict)   # order of the run's first Inf/NaN entries -> (partner order, abnormal?)


def _index_arrays(index: IntIndex) -> tuple:
    return (np.frombuffer(index._keys, dtype=np.int64).copy() if len(index._keys) else np.empty(0, np.int64),
            np.frombuffer(index._vals, dtype=np.int64).copy() if len(index._vals) else np.empty(0, np.int64))


def _scan_part(scan: SideScan, hashes: list[int]) -> ScanPart:
    return ScanPart(
        entries=scan.entries, apis=scan.apis, modules=scan.modules, nonfinite=scan.nonfinite,
        first_abnormal=scan.first_abnormal, first_abnormal_module=scan.first_abnormal_module,
        abnormal_param_shapes=set(scan.abnormal_param_shapes), param_keys=_index_arrays(scan.param_keys),
        producers=_index_arrays(scan.producers), first_order=scan.first_order,
        first_loss_order=scan.first_loss_order, first_backward_order=scan.first_backward_order,
        issue_counts=dict(scan.issues.counts),
        issue_first=dict(scan.issues.first), modes=dict(scan._modes),
        name_hashes=np.array(hashes, dtype=np.int64))


def compare_part(task: PartTask) -> PartResult:
    """Compare one pair of ranges the way `compare_dumps` streams (mode fixed beforehand)."""
    try:
        return _compare_part(task)
    except Unsupported as exc:
        return PartResult(False, str(exc))
    except (OSError, RecursionError, MemoryError) as exc:
        return PartResult(False, f"{type(exc).__name__}: {exc}")


def _compare_part(task: PartTask) -> PartResult:
    run_path, against_path = Path(task.run_path), Path(task.against_path)
    run = SideScan(run_path, DumpHeader(), keep_producers=True)
    against = SideScan(against_path, DumpHeader())
    state = _Pass(run, against, task.exact)
    state.mode = task.mode
    res = state.res
    twins: dict[int, tuple[int, bool]] = {}
    process = state.process

    def process_pair(a: Entry, b: Entry) -> None:
        process(a, b, "name")
        if a is run.first_abnormal or a is run.first_abnormal_module:
            twins[a.order] = (b.order, any(t.abnormal() for t in b.tensors()))

    hashes_a: list[int] = []
    hashes_b: list[int] = []

    def side(path: Path, rng: tuple[int, int | None], scan: SideScan, hashes: list[int]):
        reader = RangeReader(path, rng[0], rng[1])
        issues = scan.issues
        observe = scan.observe
        add = hashes.append
        for order, (name, body) in enumerate(reader.entries()):
            e = build_entry(name, body, order, issues)
            observe(e)
            add(hash(name))
            yield e

    pending_a: dict[str, Entry] = {}
    pending_b: dict[str, Entry] = {}
    it_a = side(run_path, task.run_range, run, hashes_a)
    it_b = side(against_path, task.against_range, against, hashes_b)
    skip = task.skip_modules
    live_a = live_b = True
    while live_a or live_b:
        if live_a:
            a = next(it_a, None)
            if a is None:
                live_a = False
            elif not (skip and a.name.is_module):
                b = pending_b.pop(a.name.full, None)
                if b is not None:
                    process_pair(a, b)
                else:
                    pending_a[a.name.full] = a
        if live_b:
            b = next(it_b, None)
            if b is None:
                live_b = False
            elif not (skip and b.name.is_module):
                a = pending_a.pop(b.name.full, None)
                if a is not None:
                    process_pair(a, b)
                else:
                    pending_b[b.name.full] = b
        if len(pending_a) + len(pending_b) > 2 * MAX_LEFTOVERS:
            return PartResult(False, "too many entries without a partner in their part")
    if len(pending_a) + len(pending_b) > MAX_LEFTOVERS:
        return PartResult(False, "too many entries without a partner in their part")
    return PartResult(
        True, run=_scan_part(run, hashes_a), against=_scan_part(against, hashes_b),
        n_compared=res.n_compared, n_error=res.n_error, n_warning=res.n_warning, n_diverged=res.n_diverged,
        max_out_err=res.max_out_err, first=res.first, first_module=res.first_module,
        weak_outputs=res.weak_outputs, left_a=list(pending_a.values()), left_b=list(pending_b.values()),
        twins=twins)


# ---------------------------------------------------------------- merge
def _shift(entry: Entry | None, offset: int, done: set[int]) -> None:
    if entry is not None and id(entry) not in done:
        entry.order += offset
        done.add(id(entry))


def _merge_scan(scan: SideScan, parts: list[ScanPart], offsets: list[int]) -> None:
    keys_p, vals_p, keys_k, vals_k = [], [], [], []
    issue_counts: dict = {}
    issue_first: dict = {}
    modes: Counter = Counter()
    for part, off in zip(parts, offsets):
        scan.entries += part.entries
        scan.apis += part.apis
        scan.modules += part.modules
        scan.nonfinite += part.nonfinite
        if scan.first_abnormal is None:
            scan.first_abnormal = part.first_abnormal
        if scan.first_abnormal_module is None:
            scan.first_abnormal_module = part.first_abnormal_module
        if scan.first_order is None and part.first_order is not None:
            scan.first_order = part.first_order + off
        if scan.first_loss_order is None and part.first_loss_order is not None:
            scan.first_loss_order = part.first_loss_order + off
        if scan.first_backward_order is None and part.first_backward_order is not None:
            scan.first_backward_order = part.first_backward_order + off
        scan.abnormal_param_shapes |= part.abnormal_param_shapes
        keys_k.append(part.param_keys[0])
        vals_k.append(part.param_keys[1])
        keys_p.append(part.producers[0])
        vals_p.append(part.producers[1] + off)
        for kind, n in part.issue_counts.items():
            issue_counts[kind] = issue_counts.get(kind, 0) + n
            issue_first.setdefault(kind, part.issue_first[kind])
        for mode, n in part.modes.items():
            modes[mode] += n
    scan.param_keys = _index_from(keys_k, vals_k)
    scan.producers = _index_from(keys_p, vals_p)
    scan.issues = EntryIssues()
    scan.issues.counts.update(issue_counts)
    scan.issues.first.update(issue_first)
    scan._modes = modes
    scan.finish()


def _index_from(keys: list, vals: list) -> IntIndex:
    index = IntIndex()
    if keys:
        k = np.concatenate(keys).astype(np.int64)
        v = np.concatenate(vals).astype(np.int64)
        index._keys.frombytes(k.tobytes())
        index._vals.frombytes(v.tobytes())
    return index


def _repeats(parts: list[ScanPart]) -> bool:
    hashes = np.concatenate([p.name_hashes for p in parts]) if parts else np.empty(0, np.int64)
    if len(hashes) < 2:
        return False
    hashes.sort()
    return bool((hashes[1:] == hashes[:-1]).any())


def compare_dumps_split(run_path: Path, against_path: Path, *, exact: bool = False,
                        parts: int | None = None, min_bytes: int | None = None) -> PassResult:
    """`compare_dumps`, on `parts` worker processes (default: every core) when the pair is big
    enough; the same result either way."""
    parts = parts or cpu_count()
    min_bytes = SPLIT_MIN_BYTES if min_bytes is None else min_bytes
    ctx = _fork_context()
    try:
        size = run_path.stat().st_size + against_path.stat().st_size
    except OSError:
        size = 0
    if parts < 2 or ctx is None or size < min_bytes:
        return compare_dumps(run_path, against_path, exact=exact)
    merged = _try_split(run_path, against_path, exact, parts, ctx)
    return merged if merged is not None else compare_dumps(run_path, against_path, exact=exact)


def _try_split(run_path: Path, against_path: Path, exact: bool, parts: int, ctx) -> PassResult | None:
    ha, hb = read_header(run_path), read_header(against_path)
    levels_differ = ha.level != hb.level and "unknown" not in (ha.level, hb.level)
    mode = _first_mode(run_path, against_path, exact, levels_differ)
    if mode is None:
        return None
    cuts = plan_cuts(run_path, against_path, parts)
    if not cuts:
        return None
    starts_a = [0] + [a + 1 for a, _ in cuts]
    ends_a = [a for a, _ in cuts] + [None]
    starts_b = [0] + [b + 1 for _, b in cuts]
    ends_b = [b for _, b in cuts] + [None]
    tasks = [PartTask(str(run_path), (sa, ea), str(against_path), (sb, eb), exact, mode, levels_differ)
             for sa, ea, sb, eb in zip(starts_a, ends_a, starts_b, ends_b)]
    try:
        with ProcessPoolExecutor(max_workers=len(tasks), mp_context=ctx) as pool:
            results = list(pool.map(compare_part, tasks))
    except (BrokenProcessPool, OSError):   # a worker died (memory?) or no process could start
        return None
    if not all(r.ok for r in results):
        return None
    if _repeats([r.run for r in results]) or _repeats([r.against for r in results]):
        return None   # a name repeats on one side: pairing depends on the streaming order
    return _merge(run_path, against_path, ha, hb, exact, mode, levels_differ, results)


def _merge(run_path: Path, against_path: Path, ha: DumpHeader, hb: DumpHeader, exact: bool, mode: str,
           levels_differ: bool, results: list[PartResult]) -> PassResult:
    off_a, off_b = [], []
    na = nb = 0
    for r in results:
        off_a.append(na)
        off_b.append(nb)
        na += r.run.entries
        nb += r.against.entries
    # global entry orders everywhere (an entry object may be referenced twice in one part)
    twins: dict[int, tuple[int, bool]] = {}   # global run order -> (global partner order, abnormal?)
    for r, oa, ob in zip(results, off_a, off_b):
        done_a: set[int] = set()
        done_b: set[int] = set()
        for e in (r.run.first_abnormal, r.run.first_abnormal_module, *r.left_a):
            _shift(e, oa, done_a)
        for e in (r.against.first_abnormal, r.against.first_abnormal_module, *r.left_b):
            _shift(e, ob, done_b)
        for cand in (r.first, r.first_module):
            if cand is not None:
                _shift(cand.a, oa, done_a)
                _shift(cand.b, ob, done_b)
        r.weak_outputs = {k + oa: v for k, v in r.weak_outputs.items()}
        for i, (j, abnormal) in r.twins.items():
            twins[i + oa] = (j + ob, abnormal)

    run = SideScan(run_path, ha, keep_producers=True)
    against = SideScan(against_path, hb)
    _merge_scan(run, [r.run for r in results], off_a)
    _merge_scan(against, [r.against for r in results], off_b)
    state = _Pass(run, against, exact)
    state.mode = mode
    res = state.res
    if levels_differ:
        res.skip_modules = True
        res.notes.append(f"the dumps have different levels ({ha.level} vs {hb.level}): "
                         "only entries present at both levels are compared")
    for r in results:
        res.n_compared += r.n_compared
        res.n_error += r.n_error
        res.n_warning += r.n_warning
        res.n_diverged += r.n_diverged
        res.max_out_err = max(res.max_out_err, r.max_out_err)
        res.weak_outputs.update(r.weak_outputs)
        for cand in (r.first, r.first_module):
            if cand is None:
                continue
            if cand.a.name.is_module:
                if res.first_module is None or cand.a.order < res.first_module.a.order:
                    res.first_module = cand
            elif res.first is None or cand.a.order < res.first.a.order:
                res.first = cand

    # entries whose partner lies in another part pair by name, as in one pass
    left_a = sorted((e for r in results for e in r.left_a), key=lambda e: e.order)
    left_b = sorted((e for r in results for e in r.left_b), key=lambda e: e.order)
    by_name_b = {e.name.full: e for e in left_b}
    pending_a: dict[str, Entry] = {}
    for a in left_a:
        b = by_name_b.pop(a.name.full, None)
        if b is None:
            pending_a[a.name.full] = a
            continue
        keep = res.nan_twin_abnormal
        state.process(a, b, "name")
        res.nan_twin_abnormal = keep
        if a is run.first_abnormal or a is run.first_abnormal_module:
            twins[a.order] = (b.order, any(t.abnormal() for t in b.tensors()))
    pending_b = {e.name.full: e for e in left_b if e.name.full in by_name_b}
    res.nan_twin_abnormal = _twin_while_streaming(run, twins)

    if ha.task != hb.task and "unknown" not in (ha.task, hb.task):
        res.notes.append(f"the dumps come from different tasks ({ha.task} vs {hb.task})")
    if run.summary_mode != against.summary_mode and "none" not in (run.summary_mode, against.summary_mode):
        res.notes.append(f"the dumps have different summary modes ({run.summary_mode} vs "
                         f"{against.summary_mode}): compared on what both carry")
    _fallback(pending_a, pending_b, state.process)
    for e in pending_a.values():
        res.run_only[("module" if e.name.is_module else "api", e.name.base)] += 1
    for e in pending_b.values():
        res.against_only[("module" if e.name.is_module else "api", e.name.base)] += 1
    return state.finish()


def _twin_while_streaming(run: SideScan, twins: dict[int, tuple[int, bool]]) -> bool | None:
    """What one pass leaves in `nan_twin_abnormal` after streaming: it is set when a pair is
    compared whose run entry is the run's first Inf/NaN entry at that moment: the first API
    entry once it has been read, else the first module entry. Entry i of the run is read at
    step i, entry j of the other dump after the run's entry j: a pair (i, j) is compared at
    step max(i, j)."""
    f, m = run.first_abnormal, run.first_abnormal_module
    if f is not None and f.order in twins:
        return twins[f.order][1]
    if m is not None and m.order in twins:
        j, abnormal = twins[m.order]
        if f is None or f.order > max(m.order, j):
            return abnormal
    return None
