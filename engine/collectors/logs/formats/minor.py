"""Smaller trainers whose metric lines are one regex each: nanoGPT (`iter N: loss X`), nanotron
(`iteration: N / T | lm_loss: ...`, SI-suffixed numbers), mmengine/xtuner (`Epoch(train) [E][i/n]`
or `Iter(train) [i/n]` then `key: value` pairs) and VeOmni (metrics in the tqdm postfix)."""
from __future__ import annotations

import re

from engine.collectors.logs.formats.base import Item, LineParser
from engine.collectors.logs.model import NUM, Record, parse_num

NANOGPT_ITER = re.compile(r"\biter (\d+): loss (" + NUM + r"), time")
NANOGPT_EVAL = re.compile(r"\bstep (\d+): train loss (" + NUM + r"), val loss (" + NUM + ")")


class NanoGptParser(LineParser):
    name = "nanogpt"
    hints = ("iter ", "train loss")

    def feed(self, text: str, lineno: int) -> list[Item] | None:
        m = NANOGPT_ITER.search(text)
        if m:
            return [Record(line=lineno, framework=self.name, step=int(m.group(1)), loss=parse_num(m.group(2)))]
        m = NANOGPT_EVAL.search(text)
        if m:
            return [Record(line=lineno, framework=self.name, kind="eval", step=int(m.group(1)),
                           loss=parse_num(m.group(2)), extra={"val_loss": parse_num(m.group(3))})]
        return None


NANOTRON = re.compile(r"iteration: (\d+) / (\d+) \|")


class NanotronParser(LineParser):
    name = "nanotron"
    hints = ("iteration: ",)

    def feed(self, text: str, lineno: int) -> list[Item] | None:
        m = NANOTRON.search(text)
        if not m:
            return None
        fields = {}
        for part in text[m.end():].split("|"):
            key, sep, value = part.partition(":")
            if sep:
                fields[key.strip()] = parse_num(value)
        return [Record(line=lineno, framework=self.name, step=int(m.group(1)), loss=fields.get("lm_loss"),
                       lr=fields.get("lr"), grad_norm=fields.get("grad_norm"))]


MMENGINE = re.compile(r"(?:Epoch\(train\)\s*\[(\d+)\]\s*\[\s*(\d+)/\s*\d+\]|Iter\(train\)\s*\[\s*(\d+)/\s*\d+\])")
MM_PAIR = re.compile(r"\b(\w+): (" + NUM + r")(?=\s|$)")


class MmengineParser(LineParser):
    name = "mmengine"
    hints = ("(train)",)

    def feed(self, text: str, lineno: int) -> list[Item] | None:
        m = MMENGINE.search(text)
        if not m:
            return None
        fields = {k: parse_num(v) for k, v in MM_PAIR.findall(text[m.end():])}
        rec = Record(line=lineno, framework=self.name, step=int(m.group(2) or m.group(3)),
                     loss=fields.get("loss"), grad_norm=fields.get("grad_norm"), lr=fields.get("lr"))
        if m.group(1):
            rec.extra["epoch"] = float(m.group(1))
        return [rec]


VEOMNI = re.compile(r"\|\s*(\d+)/(\d+) \[[^\]]*?,\s*loss: (" + NUM + r")(?:, grad_norm: (" + NUM + r"))?"
                    r"(?:, lr: (" + NUM + r"))?")


class VeomniParser(LineParser):
    name = "veomni"
    hints = (", loss: ",)

    def feed(self, text: str, lineno: int) -> list[Item] | None:
        m = VEOMNI.search(text)
        if not m:
            return None
        return [Record(line=lineno, framework=self.name, step=int(m.group(1)), loss=parse_num(m.group(3)),
                       grad_norm=parse_num(m.group(4)), lr=parse_num(m.group(5)))]
