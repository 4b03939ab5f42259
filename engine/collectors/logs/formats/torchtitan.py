"""torchtitan metric lines (`step: N  loss: X  [grad_norm: G]  memory: ...`), ANSI colour codes
stripped first; legacy `wps` lines; `validate step:` lines as evaluation records."""
from __future__ import annotations

import re

from precdx.collectors.logs.formats.base import Item, LineParser
from precdx.collectors.logs.model import NUM, Record, parse_num

ANSI = re.compile(r"\x1b\[[0-9;]*m")
STEP = re.compile(r"(validate )?step:\s*(\d+)\s+loss:\s*(" + NUM + r")\s+(?:grad_norm:\s*(" + NUM + r")\s+)?"
                  r"(?:memory|tps|wps|tflops|mfu)")


class TorchtitanParser(LineParser):
    name = "torchtitan"
    pure = True
    hints = ("step:",)

    def feed(self, text: str, lineno: int) -> list[Item] | None:
        if "\x1b" in text:
            text = ANSI.sub("", text)
        m = STEP.search(text)
        if not m:
            return None
        return [Record(line=lineno, framework=self.name, kind="eval" if m.group(1) else "train",
                       step=int(m.group(2)), loss=parse_num(m.group(3)), grad_norm=parse_num(m.group(4)))]
