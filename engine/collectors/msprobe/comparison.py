"""Our own comparison of two dumps of the same step and rank, in one streaming pass.

Both dump.json files are read entry by entry at the same pace; an entry is paired with the other
side's entry of the same name (API name + call index + direction, shapes checked) as soon as both
have been seen, compared, and dropped. Only unpaired entries and a small index of output
statistics (to find which earlier call produced a tensor) are kept, so memory stays far below the
size of the files. Leftovers are paired by a fallback (same API and input shapes at a shifted call
index) and what still has no partner is a structure difference.
"""
from __future__ import annotations

import math
from collections import Counter, defaultdict
from functools import lru_cache
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator

from precdx.collectors.msprobe.dumpdir import DumpHeader, DumpReadError, iter_entries, read_header
from precdx.collectors.msprobe.entries import Entry, EntryIssues, TensorInfo
from precdx.collectors.msprobe.intindex import IntIndex
from precdx.collectors.msprobe.naming import api_family
from precdx.collectors.msprobe.verdicts import DIVERGE, ApiDiff, compare_api, compare_summary

_HARD_INPUT = frozenset({"dtype", "shape", "scalar_arg", "md5", "nonfinite"})
_INIT_OPS = ("empty", "empty_like", "new_empty", "new_empty_strided", "empty_strided",
             "empty_with_format")


@lru_cache(maxsize=4096)
def _is_loss(api_base: str) -> bool:
    return api_family(api_base) == "loss"


def tensor_key(t: TensorInfo) -> int | None:
    """Identity of a tensor's content for producer look-up: element count and extreme values
    survive the view/transpose/cast ops msprobe does not dump."""
    if t.kind != "tensor" or t.max is None or t.min is None:
        return None
    if t.abnormal():
        # NaN never equals itself and hashes by identity: key non-finite tensors by their text
        return hash((t.numel, repr(t.max), repr(t.min), t.shape))
    return hash((t.numel, t.max, t.min))


@dataclass
class SideScan:
    """What one dump told while it streamed past."""

    path: Path
    header: DumpHeader
    entries: int = 0
    apis: int = 0
    modules: int = 0
    nonfinite: int = 0
    complete: bool = True
    error: str | None = None
    summary_mode: str = "none"
    first_abnormal: Entry | None = None          # first API entry with NaN/Inf
    first_abnormal_module: Entry | None = None   # first module entry with NaN/Inf (L0 dumps)
    abnormal_param_shapes: set = field(default_factory=set)
    param_keys: IntIndex = field(default_factory=IntIndex)
    producers: IntIndex = field(default_factory=IntIndex)  # tensor_key -> earliest order producing it
    keep_producers: bool = False
    first_order: int | None = None               # order of the first entry seen
    first_loss_order: int | None = None          # first forward API of the loss family (cross_entropy ...)
    first_backward_order: int | None = None      # first backward entry (weight gradients excluded)
    issues: EntryIssues = field(default_factory=EntryIssues)   # odd content, reported once per file
    _modes: Counter = field(default_factory=Counter)

    def observe(self, e: Entry) -> None:
        self.entries += 1
        if e.name.is_module:
            self.modules += 1
        else:
            self.apis += 1
        abnormal = False
        modes = self._modes
        for ts in (e.inputs, e.params, e.outputs):
            for t in ts:
                if t.kind != "tensor":
                    continue
                if t.md5 is not None:
                    modes["xor" if t.max is None and t.norm is None else "md5"] += 1
                elif t.max is not None or t.norm is not None:
                    modes["statistics"] += 1
                if t.bad:   # t.abnormal()
                    abnormal = True
        for t in e.params:
            key = tensor_key(t)
            if key is not None:
                self.param_keys.add(key)
            if t.abnormal():
                self.abnormal_param_shapes.add(t.shape)
        if abnormal and e.name.base.rsplit(".", 1)[-1] not in _INIT_OPS:
            self.nonfinite += 1
            if e.name.is_module:
                if self.first_abnormal_module is None:
                    self.first_abnormal_module = e
            elif self.first_abnormal is None:
                self.first_abnormal = e
        if self.first_order is None:
            self.first_order = e.order
        direction = e.name.direction
        if direction == "forward":
            if self.first_loss_order is None and not e.name.is_module and _is_loss(e.name.base):
                self.first_loss_order = e.order
        elif self.first_backward_order is None and direction == "backward":
            self.first_backward_order = e.order
        if self.keep_producers:
            # module outputs too: in a module-level view (L0 dumps, the training monitor) the
            # tensor a module hands on has no API producer; in mix dumps an API made it earlier
            for t in e.outputs:
                key = tensor_key(t)
                if key is not None:
                    self.producers.add(key, e.order)

    def finish(self) -> None:
        if self._modes:
            self.summary_mode = self._modes.most_common(1)[0][0]
            if self.summary_mode == "statistics" and self._modes.get("md5"):
                self.summary_mode = "md5"
        if self.header.task == "structure":
            self.summary_mode = "none"

    @property
    def nan_entry(self) -> Entry | None:
        return self.first_abnormal or self.first_abnormal_module


@dataclass
class Candidate:
    """A paired API that departs; the earliest one in the run's order is the first divergence."""

    a: Entry
    b: Entry
    diff: ApiDiff
    matched_by: str


@dataclass
class PassResult:
    """Everything one comparison pass found."""

    run: SideScan
    against: SideScan | None
    mode: str = "statistics"
    n_compared: int = 0
    n_error: int = 0
    n_warning: int = 0
    n_diverged: int = 0
    n_fallback: int = 0
    max_out_err: float = 0.0
    first: Candidate | None = None
    first_module: Candidate | None = None
    weak_outputs: dict = field(default_factory=dict)    # order -> output error above INPUT_MATCH
    run_only: Counter = field(default_factory=Counter)  # (kind, name) -> extra calls
    against_only: Counter = field(default_factory=Counter)
    nan_twin_abnormal: bool | None = None   # the other dump's entry of run.nan_entry is non-finite
    skip_modules: bool = False
    notes: list[str] = field(default_factory=list)


def _scanned(path: Path, scan: SideScan, on_entry: Callable[[int], None] | None) -> Iterator[Entry]:
    try:
        for e in iter_entries(path, scan.issues):
            scan.observe(e)
            if on_entry is not None and scan.entries % 2048 == 0:
                on_entry(scan.entries)
            yield e
    except DumpReadError as exc:
        scan.complete = False
        scan.error = f"{exc} (after {exc.entries_read} entries)"
    scan.finish()


def _shape_signature(e: Entry) -> tuple:
    return tuple(t.shape for t in e.inputs if t.kind == "tensor")


def scan_only(path: Path) -> SideScan:
    """Stream one dump without a partner (first NaN, counts)."""
    scan = SideScan(path, read_header(path))
    for _ in _scanned(path, scan, None):
        pass
    return scan


class _Pass:
    """The per-pair bookkeeping of one comparison, whatever paired the entries (names in two
    dump files, or msprobe's own pairing in a compare result)."""

    def __init__(self, run: SideScan, against: SideScan, exact: bool) -> None:
        self.res = PassResult(run, against)
        self.exact = exact
        self.mode: str | None = None

    def mode_for(self, a: Entry, b: Entry) -> str:
        if self.mode is None:
            md5 = any(t.md5 is not None for t in a.tensors()) and any(t.md5 is not None for t in b.tensors())
            stats = any(t.max is not None or t.norm is not None for t in a.tensors())
            if md5 and (self.exact or not stats):
                self.mode = "md5"
            elif md5 and not self.exact:
                # md5 dumps carry statistics too; across devices checksums always differ
                self.mode = "statistics"
            else:
                self.mode = "exact" if self.exact else "statistics"
        return self.mode

    def process(self, a: Entry, b: Entry, how: str) -> None:
        res, run = self.res, self.res.run
        mode = self.mode_for(a, b)
        quick = compare_summary(a, b, mode)
        if quick is None:
            d: ApiDiff | None = compare_api(a, b, mode)
            label, diverged, out, in_err = d.label, d.diverged, d.out_err, d.in_err
            in_hard = bool(d.input_reasons() & _HARD_INPUT)
        else:   # the common case, without the per-tensor diffs (built below if it becomes a candidate)
            d = None
            label, diverged, out, in_err = quick
            in_hard = False
        res.n_compared += 1
        if how == "fallback":
            res.n_fallback += 1
        if label == "error":
            res.n_error += 1
        elif label == "warning":
            res.n_warning += 1
        if diverged:
            res.n_diverged += 1
        if math.isfinite(out):
            res.max_out_err = max(res.max_out_err, out)
        if run.nan_entry is a:
            res.nan_twin_abnormal = any(t.abnormal() for t in b.tensors())
        threshold = 0.0 if mode in ("exact", "md5") else DIVERGE
        flagged = diverged or in_err > threshold or in_hard
        if mode not in ("exact", "md5") and out > 0.01:
            res.weak_outputs[a.order] = out
        if not flagged:
            return
        if a.name.is_module:
            if res.first_module is None or a.order < res.first_module.a.order:
                res.first_module = Candidate(a, b, d or compare_api(a, b, mode), how)
        elif res.first is None or a.order < res.first.a.order:
            res.first = Candidate(a, b, d or compare_api(a, b, mode), how)

    def finish(self) -> PassResult:
        self.res.mode = self.mode or ("exact" if self.exact else "statistics")
        return self.res


def compare_dumps(run_path: Path, against_path: Path, *, exact: bool = False,
                  on_entry: Callable[[int], None] | None = None) -> PassResult:
    """Compare the run's dump with the other run's dump of the same step/rank in one pass.
    `exact`: the two are the same job (a rerun): any difference counts."""
    ha, hb = read_header(run_path), read_header(against_path)
    run = SideScan(run_path, ha, keep_producers=True)
    against = SideScan(against_path, hb)
    state = _Pass(run, against, exact)
    res = state.res
    process = state.process

    levels_differ = ha.level != hb.level and "unknown" not in (ha.level, hb.level)
    if levels_differ:
        res.skip_modules = True
        res.notes.append(f"the dumps have different levels ({ha.level} vs {hb.level}): "
                         "only entries present at both levels are compared")

    pending_a: dict[str, Entry] = {}
    pending_b: dict[str, Entry] = {}
    it_a = _scanned(run_path, run, on_entry)
    it_b = _scanned(against_path, against, None)
    live_a = live_b = True
    while live_a or live_b:
        if live_a:
            a = next(it_a, None)
            if a is None:
                live_a = False
            elif not (res.skip_modules and a.name.is_module):
                b = pending_b.pop(a.name.full, None)
                if b is not None:
                    process(a, b, "name")
                else:
                    pending_a[a.name.full] = a
        if live_b:
            b = next(it_b, None)
            if b is None:
                live_b = False
            elif not (res.skip_modules and b.name.is_module):
                a = pending_a.pop(b.name.full, None)
                if a is not None:
                    process(a, b, "name")
                else:
                    pending_b[b.name.full] = b
    if ha.task != hb.task and "unknown" not in (ha.task, hb.task):
        res.notes.append(f"the dumps come from different tasks ({ha.task} vs {hb.task})")
    if run.summary_mode != against.summary_mode and "none" not in (run.summary_mode, against.summary_mode):
        res.notes.append(f"the dumps have different summary modes ({run.summary_mode} vs "
                         f"{against.summary_mode}): compared on what both carry")
    _fallback(pending_a, pending_b, process)
    for e in pending_a.values():
        res.run_only[("module" if e.name.is_module else "api", e.name.base)] += 1
    for e in pending_b.values():
        res.against_only[("module" if e.name.is_module else "api", e.name.base)] += 1
    return state.finish()


def compare_pairs(run: SideScan, against: SideScan, pairs: Iterable[tuple[Entry, Entry | None]],
                  *, exact: bool = False) -> PassResult:
    """The same comparison over entries another tool already paired (msprobe compare results:
    one target entry with its bench twin, or None when msprobe found no twin). The target side
    streams past `run` (first NaN, producers), the bench side past `against`."""
    run.keep_producers = True
    state = _Pass(run, against, exact)
    for a, b in pairs:
        run.observe(a)
        if b is None:
            state.res.run_only[("module" if a.name.is_module else "api", a.name.base)] += 1
            continue
        against.observe(b)
        state.process(a, b, "msprobe")
    run.finish()
    against.finish()
    return state.finish()


def _fallback(pending_a: dict[str, Entry], pending_b: dict[str, Entry],
              process: Callable[[Entry, Entry, str], None]) -> None:
    """Pair leftovers of the same API and direction in call order when their input shapes agree
    (an extra call on one side shifts every later call index of that API)."""
    groups_b: dict[tuple, list[Entry]] = defaultdict(list)
    for e in sorted(pending_b.values(), key=lambda e: e.order):
        groups_b[(e.name.base, e.name.direction)].append(e)
    for a in sorted(pending_a.values(), key=lambda e: e.order):
        options = groups_b.get((a.name.base, a.name.direction))
        if not options:
            continue
        sig = _shape_signature(a)
        for i, b in enumerate(options):
            if _shape_signature(b) == sig:
                del options[i]
                del pending_a[a.name.full]
                del pending_b[b.name.full]
                process(a, b, "fallback")
                break
