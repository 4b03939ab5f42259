"""Smaller trainers whose metric lines are one regex each: nanoGPT (`iter N: loss X`), nanotron
(`iteration: N / T | lm_loss: ...`, SI-suffixed numbers), mmengine/xtuner (`Epoch(train) [E][i/n]`
or `Iter(train) [i/n]` then `key: value` pairs) and VeOmni (metrics in the tqdm postfix)."""
from __future__ import annotations

import re

from precdx.collectors.logs.formats.base import Item, LineParser
from precdx.collectors.logs.model import NUM, Record, parse_num

NANOGPT_ITER = re.compile(r"\biter (\d+): loss (" + NUM + r"), time")
NANOGPT_EVAL = re.compile(r"\bstep (\d+): train loss (" + NUM + r"), val loss (" + NUM + ")")


class NanoGptParser(LineParser):
    name = "nanogpt"
    pure = True
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
    pure = True
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
    pure = True
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
    pure = True
    hints = (", loss: ",)

    def feed(self, text: str, lineno: int) -> list[Item] | None:
        m = VEOMNI.search(text)
        if not m:
            return None
        return [Record(line=lineno, framework=self.name, step=int(m.group(1)), loss=parse_num(m.group(3)),
                       grad_norm=parse_num(m.group(4)), lr=parse_num(m.group(5)))]


# Custom training loops printing `key: value` pairs (`loss: 2.31 | lr: 1e-4 | grad_norm: 0.9 |
# epoch: 0.1`, `step=12, loss=2.31, lr=1e-4`): the last resort, tried after every known format.
KV_PAIR = re.compile(r"(?:^|(?<=[|,;\s\[(]))([A-Za-z][\w/.\-]*(?: [A-Za-z][\w/.\-]*){0,3})\s*[:=]\s*(" + NUM +
                     r")(?=\s*(?:[|,;)\]]|$|\s))")
_KV_LOSS = ("loss", "train_loss", "train loss", "lm_loss", "lm loss", "train/loss", "training_loss", "total_loss")
_KV_STEP = ("step", "global_step", "iter", "iteration", "it", "train/step", "steps")
_KV_GRAD = ("grad_norm", "grad norm", "gnorm", "grad_norm_total", "train/grad_norm", "gradient_norm")
_KV_LR = ("lr", "learning_rate", "learning rate", "train/lr", "train/learning_rate")
_KV_SCALE = ("loss_scale", "loss scale", "scale")
_KV_EVAL = ("val_loss", "eval_loss", "valid_loss", "validation_loss", "val loss", "eval loss")


class KeyValueParser(LineParser):
    """`key: value` lines of a loop precdx has no format for. A line is a record when it has a
    loss key and at least two other numeric pairs separated by `|`, `,` or `;` (so prose that
    mentions a loss is not one). The step comes from a step-like key, else the line order."""

    name = "keyvalue"
    hints = ("loss",)
    fallback = True
    pure = True

    def feed(self, text: str, lineno: int) -> list[Item] | None:
        if not any(sep in text for sep in ("|", ",", ";")):
            return None
        pairs: dict[str, float] = {}
        for key, value in KV_PAIR.findall(text):
            num = parse_num(value)
            if num is not None:
                pairs.setdefault(" ".join(key.lower().split()), num)
        if len(pairs) < 3:
            return None
        loss = next((pairs[k] for k in _KV_LOSS if k in pairs), None)
        eval_loss = next((pairs[k] for k in _KV_EVAL if k in pairs), None)
        if loss is None and eval_loss is None:
            return None
        step = next((pairs[k] for k in _KV_STEP if k in pairs), None)
        if step is not None and (step != int(step) or step < 0):
            step = None
        kind = "train" if loss is not None else "eval"
        rec = Record(line=lineno, framework=self.name, kind=kind, step=step,
                     loss=loss if loss is not None else eval_loss,
                     grad_norm=next((pairs[k] for k in _KV_GRAD if k in pairs), None),
                     lr=next((pairs[k] for k in _KV_LR if k in pairs), None),
                     loss_scale=next((pairs[k] for k in _KV_SCALE if k in pairs), None))
        if "epoch" in pairs:
            rec.extra["epoch"] = pairs["epoch"]
        return [rec]
