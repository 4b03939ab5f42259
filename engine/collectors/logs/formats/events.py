"""Non-metric lines that matter for diagnosis, whatever the framework: Megatron rerun-state-machine
verdicts, loss-spike detectors, silent-data-corruption checks, NaN detectors, tracebacks, OOM,
checkpoint resumes, data re-loops and kill signals."""
from __future__ import annotations

import re

from precdx.collectors.logs.formats.base import Item, LineParser
from precdx.collectors.logs.model import Event

# Literal prefilter: plain substring tests are several times faster than a regex alternation.
_NEEDLES = ("rerun", "Unexpected result", "Possible ", "Correct result", "Traceback", "out of memory",
            "OutOfMemory", "SilentCheck", "ilent data", "ilent_data", "pike", "NaN detected", "found NaN",
            "loaded checkpoint", "re-looped", "death signal", "index out of range", "srcIndex <",
            "indexSelect", "is out of bounds for dimension", "n_classes", "device-side assert",
            "illegal memory access", "contains either", "non-finite", "is nan", "is NaN")
ITER = re.compile(r"iteration #?(\d+)")
NODE = re.compile(r"node[:= ]\s*([A-Za-z0-9][\w.\-]*)")
MESSAGE = re.compile(r"message='([^']*)'")
_RULES: tuple[tuple[str, str], ...] = (
    ("Unexpected result", "rerun_unexpected_result"),
    ("not reproducible on a different", "rerun_persistent_error"),
    ("Possible persistent error", "rerun_persistent_error"),
    ("is not reproducible within the tolerance", "rerun_not_reproducible"),
    ("Possible transient error", "rerun_transient_error"),
    ("Correct result (but possible Application error)", "rerun_application_error"),
    ("is reproducible", "rerun_reproducible"),
    ("Potential loss spike detected", "spike_detected"),
    ("Loss spike detected", "spike_detected"),
    ("SilentCheck", "silent_data_check"),
    ("ilent data", "silent_data_check"),
    ("ilent_data", "silent_data_check"),
    ("found NaN in local grad norm", "nan_in_grad"),
    ("NaN detected", "nan_detected"),
    ("probability tensor contains either", "nan_detected"),
    ("non-finite loss", "nan_detected"),
    ("Loss is NaN", "nan_detected"),
    ("loss is nan", "nan_detected"),
    ("Traceback (most recent call last)", "traceback"),
    ("index out of range in self", "index_out_of_range"),
    ("srcIndex < srcSelectDimSize", "index_out_of_range"),
    ("indexSelectLargeIndex", "index_out_of_range"),
    ("indexSelectSmallIndex", "index_out_of_range"),
    ("is out of bounds for dimension", "index_out_of_range"),
    ("t >= 0 && t < n_classes", "index_out_of_range"),
    ("device-side assert", "device_error"),
    ("illegal memory access", "device_error"),
    ("out of memory", "oom"),
    ("OutOfMemory", "oom"),
    ("successfully loaded checkpoint", "checkpoint_resume"),
    ("re-looped", "data_reloop"),
    ("death signal", "terminated_by_signal"),
)


class EventParser(LineParser):
    name = "events"
    stateless = True
    hints = ()  # every line; the compiled prefilter does the selection
    triggers = _NEEDLES

    def feed(self, text: str, lineno: int) -> list[Item] | None:
        for needle in _NEEDLES:
            if needle in text:
                break
        else:
            return None
        out: list[Item] = []
        for needle, kind in _RULES:
            if needle in text:
                out.append(self._event(text, lineno, kind))
                break
        # Megatron's spike check reports through the rerun machine: keep both readings.
        if "piky loss" in text and not any(e.kind == "spike_detected" for e in out):
            out.append(self._event(text, lineno, "spike_detected"))
        return out or None

    @staticmethod
    def _event(text: str, lineno: int, kind: str) -> Event:
        step = None
        m = ITER.search(text)
        if m:
            step = int(m.group(1))
        node = NODE.search(text)
        msg = MESSAGE.search(text)
        if kind == "checkpoint_resume" and (step is None or step == 0):
            kind = "checkpoint_load"  # loading the initial weights is not a resume
        return Event(line=lineno, kind=kind, step=step, node=node.group(1) if node else None,
                     message=(msg.group(1) if msg else text.strip())[:200])
