"""`precdx ask`: a terminal consultation. The planner picks the most valuable question, the
person answers (yes / no / a number / skip / quit), the answer becomes an observation fact, and
the loop goes on until one hypothesis dominates, nothing useful is left to ask, or the question
budget is spent. Answers may come from a pipe (one per line), so a consultation can be scripted.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Callable, Iterable

import click

from precdx.diagnosis import Diagnosis, diagnose
from precdx.errors import PrecdxError, Warnings
from precdx.facts import Fact, FactSet
from precdx.planner.answers import answer_to_fact
from precdx.planner.nextbest import Suggestion, dominant, plan

QUIT = {"quit", "q", "exit", "stop", "退出", "结束"}

_L = {
    "en": {
        "intro": "precdx ask: {n} fact(s) so far. Answer yes / no / a number, 'skip' if you don't know, 'quit' to stop.",
        "leading": "leading: {title} ({mode}, score {score:.2f})",
        "nothing_yet": "no hypothesis yet",
        "yn": "yes/no/skip", "number": "number/skip",
        "dominant": "{title} ({mode}) dominates with score {score:.2f}.",
        "exhausted": "Nothing useful is left to ask.",
        "budget": "Question budget ({n}) spent.",
        "quit": "Stopped.",
        "more": "Evidence still worth getting:",
        "asked": "{n} question(s) asked.",
        "differential": "Differential from the symptoms ({profile}):",
        "first": "Cheapest evidence that splits it (worth more than any question now): [{cost}] {text}",
        "alone": "One run and nothing to compare it with: no gap can be measured yet. By prior only:",
        "reference": "First add the reference: [{cost}] {text}",
    },
    "zh": {
        "intro": "precdx ask：目前有 {n} 条事实。请回答 是/否/数值；不知道请输入 skip，输入 quit 结束。",
        "leading": "当前最可能：{title}（{mode}，得分 {score:.2f}）",
        "nothing_yet": "暂无假设",
        "yn": "是/否/skip", "number": "数值/skip",
        "dominant": "{title}（{mode}）占主导，得分 {score:.2f}。",
        "exhausted": "没有值得再问的问题了。",
        "budget": "已达到提问上限（{n}）。",
        "quit": "已停止。",
        "more": "仍值得补充的证据：",
        "asked": "共提问 {n} 次。",
        "differential": "根据症状的鉴别诊断（{profile}）：",
        "first": "最能区分的低成本证据（当前比任何问题都更有价值）：[{cost}] {text}",
        "alone": "只有一次运行、没有可比较的参照：尚无法度量差异。仅按先验排序：",
        "reference": "请先补充参照：[{cost}] {text}",
    },
}


@dataclass
class ConsultResult:
    diagnosis: Diagnosis
    asked: list[str] = field(default_factory=list)      # question names, in order
    answers: dict[str, str] = field(default_factory=dict)
    reason: str = ""                                    # dominant | exhausted | budget | quit


def _click_prompt(s: Suggestion, lang: str) -> str:
    hint = _L[lang]["number" if s.answer == "number" else "yn"]
    try:
        answer = click.prompt(hint, default="", show_default=False, prompt_suffix=": ")
    except click.Abort:
        return "quit"  # end of input (scripted) or Ctrl-D
    if not sys.stdin.isatty():
        click.echo(f"  -> {answer or 'skip'}")
    return answer


def consult(facts: FactSet | Iterable[Fact], *, lang: str = "en", max_questions: int = 12,
            warnings: Warnings | None = None, engine: str = "python", rules_path: str | None = None,
            prompt: Callable[[Suggestion], str] | None = None,
            echo: Callable[[str], None] = click.echo) -> ConsultResult:
    """Run the consultation; `prompt` (given a question, returns the raw answer) and `echo`
    replace the terminal for scripted use. Returns the final diagnosis and what was asked."""
    L = _L.get(lang, _L["en"])
    warnings = warnings if warnings is not None else Warnings()
    current = FactSet(facts)
    ask = prompt or (lambda s: _click_prompt(s, lang))
    skipped: set[str] = set()
    result = ConsultResult(diagnosis=None)  # type: ignore[arg-type]
    echo(L["intro"].format(n=len(current)))
    for w in warnings:
        echo(f"warning: {w.get('path', '') + ': ' if w.get('path') else ''}{w['message']}")
    first_round = True
    while True:
        diag = diagnose(current, engine=engine, lang=lang, rules_path=rules_path, warnings=warnings,
                        with_near_misses=False)
        if first_round:
            first_round = False
            _open_with_differential(diag, current, lang=lang, engine=engine, rules_path=rules_path, echo=echo)
        result.diagnosis = diag
        top = dominant(diag)
        if top is not None:
            result.reason = "dominant"
            echo(L["dominant"].format(title=top.title, mode=top.failure_mode, score=top.score))
            break
        if len(result.asked) >= max_questions:
            result.reason = "budget"
            echo(L["budget"].format(n=max_questions))
            break
        best = plan(current, engine=engine, lang=lang, rules_path=rules_path, diag=diag, skipped=skipped,
                    kinds=("question",), limit=1)
        if not best:
            result.reason = "exhausted"
            echo(L["exhausted"])
            break
        question = best[0]
        if diag.hypotheses:
            h = diag.hypotheses[0]
            echo(L["leading"].format(title=h.title, mode=h.failure_mode, score=h.score))
        else:
            echo(L["nothing_yet"])
        echo(f"Q{len(result.asked) + 1} [{question.cost_label}] {question.text}")
        fact = None
        while True:
            raw = ask(question)
            text = (raw or "").strip()
            if text.lower() in QUIT:
                break
            try:
                fact = answer_to_fact(question.id, text, source="precdx ask")
                break
            except PrecdxError as exc:
                echo(f"  {exc.message}")
        if text.lower() in QUIT:
            result.reason = "quit"
            echo(L["quit"])
            break
        result.asked.append(question.id)
        result.answers[question.id] = text or "skip"
        if fact is None:
            skipped.add(question.id)
        else:
            current.add(fact)
    _report(result, current, lang=lang, engine=engine, rules_path=rules_path, echo=echo)
    return result


def _open_with_differential(diag, facts: FactSet, *, lang: str, engine: str, rules_path: str | None,
                            echo: Callable[[str], None]) -> None:
    """Start from the differential: the ranked modes the symptoms allow, and the cheapest evidence
    that splits them when it is worth more than the best question."""
    L = _L.get(lang, _L["en"])
    if diag.split_step is not None and diag.split_step.id == "baseline":
        # one run alone: the questions can wait for the reference every symptom is measured against
        echo(L["alone"])
        for h in diag.hypotheses[:5]:
            echo(f"  {h.score:.2f}  {h.failure_mode}")
        echo(L["reference"].format(cost=diag.split_step.cost_label, text=diag.split_step.action))
        if diag.split_step.command:
            echo(f"      $ {diag.split_step.command}")
        return
    if diag.profile is not None and (diag.profile.symptoms or diag.profile.own) and diag.hypotheses:
        echo(L["differential"].format(profile=diag.profile.text))
        for h in diag.hypotheses[:5]:
            echo(f"  {h.score:.2f}  {h.failure_mode}")
    best = plan(facts, engine=engine, lang=lang, rules_path=rules_path, diag=diag,
                kinds=("question", "probe"), limit=1)
    if best and best[0].kind == "probe":
        echo(L["first"].format(cost=best[0].cost_label, text=best[0].text))
        if best[0].command:
            echo(f"      $ {best[0].command}")


def _report(result: ConsultResult, facts: FactSet, *, lang: str, engine: str, rules_path: str | None,
            echo: Callable[[str], None]) -> None:
    from precdx.render.text import render_text

    L = _L.get(lang, _L["en"])
    echo("")
    echo(render_text(result.diagnosis, max_hypotheses=3).rstrip())
    more = plan(facts, engine=engine, lang=lang, rules_path=rules_path, diag=result.diagnosis,
                kinds=("check", "probe", "experiment"), limit=3) if result.reason != "dominant" else []
    if more:
        echo("")
        echo(L["more"])
        for s in more:
            echo(f"  [{s.cost_label}] {s.text}")
            if s.command:
                echo(f"      $ {s.command}")
    echo(L["asked"].format(n=len(result.asked)))
