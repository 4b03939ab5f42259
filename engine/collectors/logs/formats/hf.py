"""Hugging Face Trainer logs: the `str(logs)` dict lines on stdout (values possibly quoted,
NaN printed bare, tqdm frames glued in front) and `trainer_state.json` `log_history`.

Semantics kept: the loss is averaged over `logging_steps`; with `logging_nan_inf_filter` (the
default) NaN step losses are filtered out of that average, so a non-finite `grad_norm` is the
more reliable NaN signal; stdout dicts carry no step, so the step is taken from the tqdm counter
printed before them when there is one.
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

from precdx.collectors.logs.formats.base import Item, LineParser
from precdx.collectors.logs.model import Record, parse_num
from precdx.errors import Warnings

DICT = re.compile(r"\{'[^{}]*\}")
PAIR = re.compile(r"'([^']+)':\s*'?([^,'}]*)'?")
TQDM = re.compile(r"\|\s*(\d+)/(\d+) \[")


def record_from_dict(values: dict[str, float], lineno: int, step_hint: int | None,
                     framework: str = "hf_trainer") -> Record | None:
    if "loss" in values:
        rec = Record(line=lineno, framework=framework, loss=values["loss"], grad_norm=values.get("grad_norm"),
                     lr=values.get("learning_rate"), step_hint=step_hint)
    elif any(k.startswith("eval_") for k in values):
        rec = Record(line=lineno, framework=framework, kind="eval", loss=values.get("eval_loss"),
                     step_hint=step_hint)
    else:
        return None  # the end-of-training summary ('train_runtime', 'train_loss') is not a step
    if "epoch" in values:
        rec.extra["epoch"] = values["epoch"]
    return rec


class HfDictParser(LineParser):
    name = "hf_trainer"
    hints = ("{'", "/it]", "it/s]")

    def __init__(self) -> None:
        self._counter: int | None = None
        self._total: int | None = None

    def state(self) -> object:
        return self._counter, self._total  # the progress counter dates the dict lines that follow

    def set_state(self, value: object) -> None:
        self._counter, self._total = value

    def feed(self, text: str, lineno: int) -> list[Item] | None:
        out: list[Item] = []
        brace = text.find("{'")
        head = text if brace < 0 else text[:brace]
        for m in TQDM.finditer(head):
            self._counter = int(m.group(1))
            self._total = int(m.group(2))
        if brace < 0:
            return None
        for m in DICT.finditer(text, brace):
            values = {}
            for key, raw in PAIR.findall(m.group(0)):
                num = parse_num(raw)
                if num is not None:
                    values[key] = num
            rec = record_from_dict(values, lineno, self._counter)
            if rec:
                if self._total and rec.kind == "train":
                    rec.extra["total_steps"] = float(self._total)
                out.append(rec)
        return out or None


def read_trainer_state(path: Path, warnings: Warnings) -> list[Record]:
    """`log_history` of a trainer_state.json as records (steps exact; NaN accepted as JSON allows)."""
    try:
        with open(path, "rb") as fh:
            data = json.loads(fh.read().decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        warnings.add(f"cannot read trainer_state.json: {exc.__class__.__name__}: {str(exc)[:120]}", path=str(path))
        return []
    except RecursionError:
        warnings.add("cannot read trainer_state.json: JSON nested too deeply", path=str(path))
        return []
    history = data.get("log_history") if isinstance(data, dict) else None
    if not isinstance(history, list):
        warnings.add("trainer_state.json has no log_history list", path=str(path))
        return []
    out: list[Record] = []
    for i, entry in enumerate(history):
        if not isinstance(entry, dict):
            continue
        values = {k: _as_float(v) for k, v in entry.items()
                  if isinstance(v, (int, float)) and not isinstance(v, bool)}
        step = entry.get("step")
        rec = record_from_dict(values, i + 1, None, framework="hf_trainer_state")
        if rec is None:
            continue
        if isinstance(step, (int, float)) and not isinstance(step, bool) and math.isfinite(step):
            rec.step = int(step)
        out.append(rec)
    return out


def _as_float(value: int | float) -> float:
    """A JSON number as float; an integer beyond float range is an overflow, as 1e999 is."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf
