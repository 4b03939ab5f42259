"""Megatron-LM `training_log` lines and the forks that print the same shape: MindSpeed-LLM
(mcore and FSDP2 paths), Megatron-DeepSpeed and Megatron-Bridge; plus validation lines and
records hard-wrapped over several physical lines.

Semantics kept: values are averages over the log interval; loss keys are printed only when the
average is >= 0 (> 0 for MindSpeed), so a missing `lm loss` on a line that printed fields that
come after the losses means the loss was non-finite; skip/nan counters are per window.
"""
from __future__ import annotations

import re

from precdx.collectors.logs.formats.base import Item, LineParser
from precdx.collectors.logs.model import NUM, Record, parse_int, parse_num

HEADER = re.compile(r"iteration\s+(\d+)\s*/\s*(\d+)\s*\|")
VALIDATION = re.compile(r"validation loss at iteration\s+(\d+)[^|]*\|\s*lm loss value:\s*(" + NUM + ")")
# Fields Megatron prints after the loss keys: seeing one proves the loss keys were skipped.
_AFTER_LOSSES = ("loss scale", "grad norm", "num zeros", "params norm", "number of skipped iterations",
                 "number of nan iterations")
_MAX_WRAP = 4
# Per-iteration settings kept for comparison (lr_compare): key as printed -> extra name.
_TRACKED = (("global batch size", "global_batch_size"), ("consumed samples", "consumed_samples"),
            ("consumed tokens", "consumed_tokens"))


def _key(text: str) -> str:
    return " ".join(text.split()).lower()


def parse_fields(text: str) -> dict[str, str]:
    """`| key: value |` pairs of one (joined) line; keys whitespace-normalised and lower-cased."""
    out: dict[str, str] = {}
    for part in text.split("|"):
        key, sep, value = part.partition(":")
        if sep:
            key = key.strip()
            if "  " in key or not key.islower():  # wrapped or odd spacing/case: normalise
                key = _key(key)
            if key:
                out[key] = value
    return out


def record_from_line(text: str, lineno: int, framework: str = "megatron", m: re.Match | None = None
                     ) -> Record | None:
    """One Megatron iteration line (already joined if it was wrapped) to a Record."""
    m = m or HEADER.search(text)
    if not m:
        return None
    fields = parse_fields(text[m.end() - 1:])
    get = fields.get
    rec = Record(line=lineno, framework=framework, step=int(m.group(1)), loss=parse_num(get("lm loss")),
                 lr=parse_num(get("learning rate")), loss_scale=parse_num(get("loss scale")),
                 grad_norm=parse_num(get("grad norm")), skipped=parse_int(get("number of skipped iterations")),
                 nan_iters=parse_int(get("number of nan iterations")))
    for key, value in fields.items():
        if key.endswith("loss") and key != "lm loss" and not key.startswith("decoupled"):
            num = parse_num(value)
            if num is not None:
                rec.extra[key] = num
    for key, name in _TRACKED:
        num = parse_num(get(key))
        if num is not None:
            rec.extra[name] = num
    total = int(m.group(2))
    if total > 0:
        rec.extra["total_steps"] = float(total)
    if rec.loss is None and any(k in fields for k in _AFTER_LOSSES):
        rec.loss_missing = True
    return rec


class MegatronParser(LineParser):
    name = "megatron"
    hints = ("iteration",)

    def __init__(self) -> None:
        self._buf: list[str] = []
        self._line = 0

    def _emit(self) -> list[Item]:
        text = " ".join(self._buf)
        self._buf = []
        self.pending = False
        rec = record_from_line(text, self._line)
        return [rec] if rec else []

    def feed(self, text: str, lineno: int) -> list[Item] | None:
        out: list[Item] = []
        if self.pending:
            # A wrapped record continues on lines that are not new log lines of their own.
            if HEADER.search(text) or len(self._buf) >= _MAX_WRAP:
                out.extend(self._emit())
            else:
                self._buf.append(text.strip())
                if text.rstrip().endswith("|"):
                    out.extend(self._emit())
                return out or None
        m = HEADER.search(text)
        if m is None:
            v = VALIDATION.search(text)
            if v:
                out.append(Record(line=lineno, framework=self.name, kind="eval", step=int(v.group(1)),
                                  loss=parse_num(v.group(2))))
            return out or None
        stripped = text.rstrip()
        if not stripped.endswith("|") and _looks_wrapped(stripped):
            self._buf = [stripped]
            self._line = lineno
            self.pending = True
            return out or None
        rec = record_from_line(text, lineno, m=m)
        if rec:
            out.append(rec)
        return out or None

    def state(self) -> object:
        # Between records nothing carries over (`_line` is only read while a record is pending).
        return (self._line, tuple(self._buf)) if self.pending else None

    def flush(self) -> list[Item]:
        return self._emit() if self.pending else []


def _looks_wrapped(text: str) -> bool:
    """A hard-wrapped record ends mid-field (a bare word after the last `|`), not with a value."""
    tail = text.rsplit("|", 1)[-1].strip()
    return bool(tail) and ":" not in tail and bool(re.fullmatch(r"[A-Za-z ]+", tail))
