"""Answers to the engine's questions (chat turns, `precdx ask`) turned into observation facts:
yes / no / a number / skip, in English or Chinese."""
from __future__ import annotations

import math
from typing import Any

from precdx.errors import PrecdxError
from precdx.facts import Fact, parse_fact
from precdx.facts.core import OBSERVATIONS

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


# Questions whose wording names one device's switches or tools: the text to ask on another
# device, or None when the question means nothing there (it is then not asked).
DEVICE_QUESTIONS: dict[str, dict[str, tuple[str, str] | None]] = {
    "vanishes_with_launch_blocking": {
        "gpu": ("Does the problem disappear when the target runs with CUDA_LAUNCH_BLOCKING=1?",
                "设置 CUDA_LAUNCH_BLOCKING=1 后问题是否消失？"),
        "cpu": None,
    },
    "stress_test_failed": {
        "gpu": ("Did a GPU diagnostic (dcgmi diag -r 3, or nvidia-smi -q -d ECC,RETIRED_PAGES) flag a card or node?",
                "GPU 诊断（dcgmi diag -r 3 或 nvidia-smi -q -d ECC,RETIRED_PAGES）是否发现故障卡或节点？"),
        "cpu": None,
    },
    "kshift_off_fixes": {"gpu": None, "cpu": None},
}


def question_applies(name: str, device: str | None) -> bool:
    """Whether the question means something for a run on `device` (None: unknown, ask)."""
    return device is None or DEVICE_QUESTIONS.get(name, {}).get(device, ()) is not None


def question_text(name: str, lang: str = "en", device: str | None = None) -> str:
    """The question as asked for a target on `device` (the catalogue wording names NPU switches)."""
    variant = DEVICE_QUESTIONS.get(name, {}).get(device) if device else None
    _, en, zh = OBSERVATIONS[name]
    if variant:
        en, zh = variant
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
