"""DeepSpeed lines: fp16 loss-scaler overflow/skip messages (all known spellings), the engine
progress line (`step=, skipped=` where `skipped` is a running total and no loss is printed),
the pipeline-engine loss line, and the DeepSpeed-Chat PPO application line."""
from __future__ import annotations

import re

from precdx.collectors.logs.formats.base import Item, LineParser
from precdx.collectors.logs.model import NUM, Event, Record, parse_int, parse_num

OVERFLOW_ZERO = re.compile(
    r"OVERFLOW! Rank (\d+) Skipping step\.(?: Attempted loss scale: (" + NUM + r"), "
    r"(?:reducing to (" + NUM + r")|but hysteresis is (\d+)\. Reducing hysteresis to (\d+)))?")
OVERFLOW_FUSED = re.compile(
    r"(?:Overflow detected|fp16 dynamic loss scale overflow!)(?: Rank \d+)? ?\.? ?Skipping step\. "
    r"Attempted loss scale: (" + NUM + r"), reducing to (" + NUM + ")")
MIN_SCALE = "Current loss scale already at minimum"
PROGRESS = re.compile(r"\bstep=(\d+), skipped=(\d+), lr=\[([^\],]*)")
PIPE = re.compile(r"steps: (\d+) loss: (" + NUM + r") .*?iter time \(s\)")
PPO = re.compile(r"\bstep: (\d+)\|ppo_ep: \d+\|act_loss: (" + NUM + r")\|cri_loss: (" + NUM + ")")


class DeepSpeedParser(LineParser):
    name = "deepspeed"
    stateless = True
    hints = ("verflow", "Skipping step", "step=", "steps: ", "act_loss", MIN_SCALE)

    def feed(self, text: str, lineno: int) -> list[Item] | None:
        out: list[Item] = []
        m = OVERFLOW_ZERO.search(text)
        if m:
            out.append(Event(line=lineno, kind="overflow", attempted=parse_num(m.group(2)),
                             reduced_to=parse_num(m.group(3)), hysteresis_to=parse_int(m.group(5))))
        else:
            m = OVERFLOW_FUSED.search(text)
            if m:
                out.append(Event(line=lineno, kind="overflow", attempted=parse_num(m.group(1)),
                                 reduced_to=parse_num(m.group(2))))
        if MIN_SCALE in text:
            out.append(Event(line=lineno, kind="loss_scale_min", message=text.strip()[:200]))
        m = PROGRESS.search(text)
        if m and "global_step=" not in text:
            out.append(Record(line=lineno, framework=self.name, step=int(m.group(1)), skipped=int(m.group(2)),
                              skipped_cumulative=True, lr=parse_num(m.group(3))))
            return out
        m = PIPE.search(text)
        if m:
            out.append(Record(line=lineno, framework="deepspeed-pipe", step=int(m.group(1)),
                              loss=parse_num(m.group(2))))
            return out
        m = PPO.search(text)
        if m:
            out.append(Record(line=lineno, framework="deepspeed-chat", step=int(m.group(1)),
                              loss=parse_num(m.group(2)), extra={"cri_loss": parse_num(m.group(3))}))
        return out or None
