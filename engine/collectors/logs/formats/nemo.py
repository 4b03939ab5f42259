"""NeMo progress output in both printer forms: the NeMo 2 `ProgressPrinter` pipe line
(`Training epoch E, iteration N/T | key: value ...`, values to 4 significant digits) and the
Lightning/`MegatronProgressBar` tqdm postfix (`reduced_train_loss=..., global_step=...`, where
NaN may print as `nan.0` and the step as a float). The step is `global_step` when printed."""
from __future__ import annotations

import re

from precdx.collectors.logs.formats.base import Item, LineParser
from precdx.collectors.logs.model import Record, parse_num

PIPE = re.compile(r"Training epoch (\d+), iteration (\d+)/(\d+)")
POSTFIX = re.compile(r"([A-Za-z_][\w/]*)=([^,\]\s]+)")


class NemoParser(LineParser):
    name = "nemo"
    pure = True
    hints = ("Training epoch", "reduced_train_loss=")

    def feed(self, text: str, lineno: int) -> list[Item] | None:
        m = PIPE.search(text)
        if m:
            fields = {}
            for part in text[m.end():].split("|"):
                key, sep, value = part.partition(":")
                if sep:
                    fields[key.strip()] = parse_num(value)
            step = fields.get("global_step")
            rec = Record(line=lineno, framework="nemo2", step=step if step is not None else float(m.group(2)),
                         loss=fields.get("reduced_train_loss"), lr=fields.get("lr"),
                         grad_norm=fields.get("grad_norm", fields.get("gradient_norm")))
            if fields.get("val_loss") is not None:
                rec.extra["val_loss"] = fields["val_loss"]
            return [rec]
        if "reduced_train_loss=" not in text:
            return None
        fields = {k: parse_num(v) for k, v in POSTFIX.findall(text)}
        rec = Record(line=lineno, framework="nemo_bar", step=fields.get("global_step"),
                     loss=fields.get("reduced_train_loss"), lr=fields.get("lr"),
                     grad_norm=fields.get("gradient_norm", fields.get("grad_norm")))
        if fields.get("loss") is not None:
            rec.extra["loss_smoothed"] = fields["loss"]
        return [rec]
