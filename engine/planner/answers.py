"""Answers to the engine's questions (chat turns, `precdx ask`) turned into observation facts:
yes / no / a number / skip, in English or Chinese."""
from __future__ import annotations

import math
from typing import Any

from engine.errors import PrecdxError
from engine.facts import Fact, parse_fact
from engine.facts.core import OBSERVATIONS

YES = {"yes", "y", "true", "t", "1", "on", "是", "是的", "对", "有", "会", "能"}
NO = {"no", "n", "false", "f", "0", "off", "否", "不", "不是", "没有", "不会", "不能"}
SKIP = {"skip", "s", "?", "dunno", "don't know", "unknown", "n/a", "na", "-", "跳过", "不知道", ""}


def question_kind(name: str) -> str:
    if name not in OBSERVATIONS:
        import difflib
        near = difflib.get_close_matches(name, OBSERVATIONS, n=1)
        raise PrecdxError(f"unknown question {name!r}",
                          hint=f"did you mean {near[0]!r}?" if near else "questions come from the "
                          "observation catalogue (GET /v1/questions)")
    return OBSERVATIONS[name][0]


def question_text(name: str, lang: str = "en") -> str:
    _, en, zh = OBSERVATIONS[name]
    return zh if lang == "zh" else en


def parse_answer(name: str, answer: Any) -> bool | float | None:
    """The answer's value: True/False for yes-no questions, a float for number questions, None
    for skip. Raises PrecdxError naming the question when the answer does not fit."""
    kind = question_kind(name)
    if answer is None:
        return None
    if isinstance(answer, str):
        text = answer.strip().lower()
        if text in SKIP:
            return None
        if kind == "bool":
            if text in YES:
                return True
            if text in NO:
                return False
            raise PrecdxError(f"question {name!r} takes yes, no or skip, not {answer!r}")
        try:
            value = float(text)
        except ValueError:
            raise PrecdxError(f"question {name!r} takes a number or skip, not {answer!r}") from None
        if not math.isfinite(value):
            raise PrecdxError(f"question {name!r} takes a finite number, not {answer!r}")
        return value
    if kind == "bool":
        if isinstance(answer, bool):
            return answer
        raise PrecdxError(f"question {name!r} takes yes, no or skip, not {answer!r}")
    if isinstance(answer, (int, float)) and not isinstance(answer, bool) and math.isfinite(answer):
        return float(answer)
    raise PrecdxError(f"question {name!r} takes a finite number or skip, not {answer!r}")


def answer_to_fact(name: str, answer: Any, *, source: str = "answer") -> Fact | None:
    """The observation fact an answer stands for, or None when the question was skipped."""
    value = parse_answer(name, answer)
    if value is None:
        return None
    field = "value" if isinstance(value, bool) else "number"
    return parse_fact({"type": "observation", "name": name, field: value, "source": source},
                      where=f"answer to {name}")
