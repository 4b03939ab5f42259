"""The built-in log formats, in the order the reader tries them on a line (the first parser
that yields a metric record for a line owns it; events are collected from all)."""
from __future__ import annotations

from precdx.collectors.logs.formats.base import Item, LineParser  # noqa: F401
from precdx.collectors.logs.formats.deepspeed import DeepSpeedParser
from precdx.collectors.logs.formats.events import EventParser
from precdx.collectors.logs.formats.hf import HfDictParser
from precdx.collectors.logs.formats.megatron import MegatronParser
from precdx.collectors.logs.formats.minor import (KeyValueParser, MmengineParser, NanoGptParser, NanotronParser,
                                                  VeomniParser)
from precdx.collectors.logs.formats.nemo import NemoParser
from precdx.collectors.logs.formats.olmo import OlmoParser
from precdx.collectors.logs.formats.torchtitan import TorchtitanParser

# Formats whose `skipped`/loss values are averages or counts over the log interval.
WINDOWED = {"megatron", "mindspeed-llm", "megatron-deepspeed", "hf_trainer", "hf_trainer_state", "nemo2", "nemo_bar"}


# Parsers that look at a line's digits only through the numbers they read (never at how many
# digits a number has: no regex of theirs counts digits), and at a number only for its value:
# what they make of a line is learnt once per line shape, or per zero shape where it depends on
# which numbers are zero (shapes.py). A literal one of them looks for may hold digits only as
# shapes.shape_safe allows (the event parser's "t >= 0 && t < n_classes"). A declared format's
# regex may test digit values, so a file read with one learns none.
DIGIT_BLIND = (EventParser, NemoParser, MegatronParser, NanotronParser, DeepSpeedParser, HfDictParser,
               TorchtitanParser, OlmoParser, MmengineParser, NanoGptParser, VeomniParser, KeyValueParser)


def builtin_parsers() -> list[LineParser]:
    """Fresh parser instances (some keep per-file state)."""
    return [EventParser(), NemoParser(), MegatronParser(), NanotronParser(), DeepSpeedParser(), HfDictParser(),
            TorchtitanParser(), OlmoParser(), MmengineParser(), NanoGptParser(), VeomniParser(),
            KeyValueParser()]  # the generic key: value reader last: any known format owns its lines first
