"""What a log parser emits: one `Record` per physical line that carries iteration metrics, one
`Event` per line that reports something happening (overflow, rerun verdict, traceback, ...), and
the number grammar every format shares (NaN/Inf spellings, `nan.0`, SI suffixes, thousands commas).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import numpy as np

# The numeric token of log-formats.md, plus the spellings real logs add: NeMo's "nan.0",
# nanotron's SI suffixes (4.71K), OLMo/torchtitan thousands separators (1,048,576).
NUM = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|NaN|NAN|inf|Inf|INF)(?:\.0)?"
NUM_RE = re.compile(NUM)
_SI = {"K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_LEAD = re.compile(r"\s*(" + NUM + r")([KMGTP](?![A-Za-z]))?")


def parse_num(text: str | None) -> float | None:
    """The number a log printed, or None when `text` does not start with one.

    NaN and Inf come back as float NaN/Inf (never dropped); "12,345" and "4.71K" are accepted.
    """
    if text is None:
        return None
    try:  # fast path: the common spellings (1.234E+00, nan, inf) are what float() reads
        return float(text)
    except ValueError:
        pass
    if "," in text and re.match(r"\s*\d{1,3}(?:,\d{3})+(?:\.\d+)?\s*$", text):
        text = text.replace(",", "")
    m = _LEAD.match(text)
    if not m:
        return None
    token = m.group(1).lower()
    if "nan" in token:
        return math.nan
    if "inf" in token:
        return -math.inf if token.startswith("-") else math.inf
    value = float(token)
    if m.group(2):
        value *= _SI[m.group(2)]
    return value


def parse_int(text: str | None) -> int | None:
    value = parse_num(text)
    if value is None or not math.isfinite(value):
        return None
    return int(value)


@dataclass(slots=True)
class Record:
    """Metrics of one logged iteration (or one evaluation), exactly as printed.

    `loss` is None when the line has no loss key; `loss_missing` says the framework drops the key
    for non-finite values (Megatron `avg >= 0`), so absence there means NaN/Inf/negative.
    `step` is the step as printed (None when the format prints none); `step_hint` is a step
    inferred from context (tqdm counter) for formats without one.
    """

    line: int
    framework: str
    kind: str = "train"              # train | eval
    step: float | None = None
    step_hint: int | None = None
    loss: float | None = None
    loss_missing: bool = False
    grad_norm: float | None = None
    lr: float | None = None
    loss_scale: float | None = None
    skipped: int | None = None
    skipped_cumulative: bool = False  # DeepSpeed prints a running total
    nan_iters: int | None = None
    window: int | None = None         # iterations averaged into this line, when known
    extra: dict[str, float] = field(default_factory=dict)


@dataclass(slots=True)
class Event:
    """Something a log line reports that is not a per-iteration metric."""

    line: int
    kind: str
    step: int | None = None
    node: str | None = None
    attempted: float | None = None     # loss-scale overflow: scale that overflowed
    reduced_to: float | None = None    # loss-scale overflow: new scale
    hysteresis_to: int | None = None
    message: str | None = None


@dataclass
class Rows:
    """Train records of one framework in columns, as the vectorised reader finds them (no object
    per line): aligned arrays, one entry per record, in line order. Same meaning as `Record`, with
    NaN for a value not printed where `Record` has None (loss and grad norm also carry whether the
    key was printed, since a printed NaN and a missing key differ there)."""

    framework: str
    line: np.ndarray          # int64, 1-based line of each record (of a multi-line one: where it ends)
    step: np.ndarray          # float64 step as printed
    loss: np.ndarray          # float64 as printed (NaN/Inf kept); NaN where not printed
    has_loss: np.ndarray      # bool: the loss key was printed (with a number)
    loss_missing: np.ndarray  # bool: see Record.loss_missing
    grad_norm: np.ndarray
    has_grad_norm: np.ndarray
    lr: np.ndarray
    loss_scale: np.ndarray
    skipped: np.ndarray       # float64 (whole numbers) or NaN
    nan_iters: np.ndarray
    skipped_cumulative: bool = False
    extra: dict[str, np.ndarray] = field(default_factory=dict)  # float64, NaN where absent
    # bool per record: no step printed (Record.step None); `step` then holds the step hint, NaN
    # for none (the builder numbers such records in order). None: every step printed.
    inferred: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.line.size)

    @staticmethod
    def concat(parts: list["Rows"]) -> "Rows":
        """Records of one framework from several readings (of one block), as one Rows in line
        order; an extra value or `inferred` one part lacks is NaN / False there."""
        line = np.concatenate([p.line for p in parts])
        order = np.argsort(line, kind="stable")
        n = [len(p) for p in parts]

        def cat(name: str) -> np.ndarray:
            return np.concatenate([getattr(p, name) for p in parts])[order]

        extra = {k: np.concatenate([p.extra.get(k, np.full(m, np.nan)) for p, m in zip(parts, n)])[order]
                 for k in sorted({k for p in parts for k in p.extra})}
        inferred = None
        if any(p.inferred is not None for p in parts):
            inferred = np.concatenate([p.inferred if p.inferred is not None else np.zeros(m, dtype=bool)
                                       for p, m in zip(parts, n)])[order]
        return Rows(parts[0].framework, line[order], cat("step"), cat("loss"), cat("has_loss"), cat("loss_missing"),
                    cat("grad_norm"), cat("has_grad_norm"), cat("lr"), cat("loss_scale"), cat("skipped"),
                    cat("nan_iters"), any(p.skipped_cumulative for p in parts), extra, inferred)

    def part(self, sel) -> "Rows":
        """The records picked by a slice, index array or boolean mask."""
        return Rows(self.framework, self.line[sel], self.step[sel], self.loss[sel], self.has_loss[sel],
                    self.loss_missing[sel], self.grad_norm[sel], self.has_grad_norm[sel], self.lr[sel],
                    self.loss_scale[sel], self.skipped[sel], self.nan_iters[sel], self.skipped_cumulative,
                    {k: v[sel] for k, v in self.extra.items()},
                    None if self.inferred is None else self.inferred[sel])
