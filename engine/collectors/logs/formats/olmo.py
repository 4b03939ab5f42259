"""OLMo console records: a `[step=N/T,epoch=E]` header line followed by indented `name=value`
lines (OLMo v1 `olmo.train` and OLMo-core `ConsoleLoggerCallback`). The record is attached to the
header line and closed by the next non-indented line."""
from __future__ import annotations

import re

from precdx.collectors.logs.formats.base import Item, LineParser
from precdx.collectors.logs.model import Record, parse_num

HEADER = re.compile(r"\[step=(\d+)/(?:\d+|\?\?\?),epoch=(\d+)")
BODY = re.compile(r"^\s{2,}([^=]+?)=(\S+)\s*$")
LOSS_KEYS = ("train/CE loss", "train/CrossEntropyLoss")
GRAD_KEYS = ("optim/total grad norm", "optim/total_grad_norm")
# What a body line's key sets (the first that applies): (key, field, key is a prefix). The block
# reader reads records in bulk from the same table (records.py).
FIELDS = (*((k, "loss", False) for k in LOSS_KEYS), *((k, "grad_norm", False) for k in GRAD_KEYS),
          ("optim/LR", "lr", True), ("optim/step skipped", "skipped", False), ("spike/SpikeScore", "spike_score", False))


class OlmoParser(LineParser):
    name = "olmo"
    hints = ("[step=",)

    def __init__(self) -> None:
        self._rec: Record | None = None

    def _close(self) -> list[Item]:
        rec, self._rec = self._rec, None
        self.pending = False
        return [rec] if rec else []

    def feed(self, text: str, lineno: int) -> list[Item] | None:
        out: list[Item] = []
        if self.pending:
            m = BODY.match(text)
            if m:
                self._absorb(m.group(1).strip(), m.group(2))
                return None
            out.extend(self._close())
        m = HEADER.search(text)
        if m:
            self._rec = Record(line=lineno, framework=self.name, step=int(m.group(1)), extra={"epoch": float(m.group(2))})
            self.pending = True
        return out or None

    def state(self) -> object:
        return repr(self._rec) if self.pending else None

    def _absorb(self, key: str, raw: str) -> None:
        rec = self._rec
        value = parse_num(raw)
        if rec is None or value is None:
            return
        for name, field, prefix in FIELDS:
            if key.startswith(name) if prefix else key == name:
                break
        else:
            return
        if field == "skipped":
            rec.skipped = int(value) if value == value else None
        elif field == "spike_score":
            rec.extra["spike_score"] = value
        else:
            setattr(rec, field, value)

    def hold(self, rec: Record) -> None:
        """Be mid-record with `rec` (the block reader read the lines of it so far in bulk)."""
        self._rec = rec
        self.pending = True

    def close(self) -> list[Item]:
        """The record being assembled, done (what the next line that is not a body line does first)."""
        return self._close()

    def flush(self) -> list[Item]:
        return self._close()
