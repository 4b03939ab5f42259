"""What a chat turn does to a session (facts in, answers in, skips remembered) and what the
session shows back (ranking, dominant hypothesis, next question). Plain functions over the
stored session; the HTTP layer only calls them."""
from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Iterable

from precdx.diagnosis import Diagnosis, diagnose
from precdx.facts import Fact, FactSet, parse_fact
from precdx.planner.answers import answer_to_fact
from precdx.planner.nextbest import dominant, plan
from precdx.service.errors import ServiceError
from precdx.service.models import Answer, NextOut, SessionState, UploadOut
from precdx.service.settings import Settings
from precdx.service.store import Session

if TYPE_CHECKING:
    from precdx.render.chat import Reply

SUGGESTIONS = 5
ECHO_FIELD_CHARS = 200   # fields of an omitted fact kept in its stub


def parse_facts(items: Iterable[dict[str, Any]], *, where: str = "facts", max_facts: int,
                max_fact_bytes: int | None = None) -> list[Fact]:
    items = list(items)
    if len(items) > max_facts:
        raise ServiceError(413, "too_many_facts", f"{len(items)} facts in one request (limit {max_facts})")
    if max_fact_bytes is not None:
        for i, item in enumerate(items):
            size = _json_size(item)
            if size > max_fact_bytes:
                kind = item.get("type") if isinstance(item, dict) else None
                named = f"{where}[{i}]" + (f" ({kind})" if isinstance(kind, str) else "")
                raise ServiceError(413, "fact_too_large",
                                   f"{named} is {size} bytes as JSON (limit {max_fact_bytes})")
    return [parse_fact(item, where=f"{where}[{i}]") for i, item in enumerate(items)]


def _json_size(item: Any) -> int:
    return len(json.dumps(item, ensure_ascii=False, separators=(",", ":"), default=str).encode("utf-8"))


# ---------------------------------------------------------------- what a response repeats back
def echo_facts(facts: list[dict[str, Any]], budget: int) -> tuple[list[dict[str, Any]], int, int]:
    """The facts as a response repeats them: in order, whole while they fit in `budget` bytes
    of JSON; a fact that does not fit is replaced by a stub (its type, its short fields,
    `"omitted": true` and its size). Returns (facts, omitted count, omitted bytes)."""
    out, used, omitted, omitted_bytes = [], 0, 0, 0
    for fact in facts:
        size = _json_size(fact)
        if used + size <= budget:
            out.append(fact)
            used += size
            continue
        stub = {k: v for k, v in fact.items()
                if isinstance(v, (str, int, float, bool)) and len(str(v)) <= ECHO_FIELD_CHARS}
        stub.update(omitted=True, bytes=size)
        out.append(stub)
        omitted += 1
        omitted_bytes += size
    return out, omitted, omitted_bytes


def echo_note(omitted: int, omitted_bytes: int, budget: int) -> dict[str, str]:
    return {"message": f"{omitted} fact(s) ({omitted_bytes} bytes) are not repeated in full in this response "
                       f"(a response repeats at most {budget} bytes of facts, PRECDX_MAX_ECHO_BYTES); they were "
                       f"used as sent and are marked \"omitted\": true",
            "source": "service"}


def limit_echo(diag: Diagnosis, budget: int) -> Diagnosis:
    """The diagnosis with its facts within the echo budget, saying so in its warnings."""
    facts, omitted, omitted_bytes = echo_facts(diag.facts, budget)
    if not omitted:
        return diag
    return diag.model_copy(update={"facts": facts, "warnings": [*diag.warnings,
                                                                echo_note(omitted, omitted_bytes, budget)]})


def answers_to_facts(answers: Iterable[Answer], *, source: str) -> tuple[list[Fact], list[str]]:
    """Facts for the answered questions, and the names of the skipped ones."""
    facts, skipped = [], []
    for a in answers:
        fact = answer_to_fact(a.question, a.answer, source=source)
        if fact is None:
            skipped.append(a.question)
        else:
            facts.append(fact)
    return facts, skipped


def apply_turn(session: Session, facts: list[Fact], answers: list[Answer], *, max_facts: int,
               collected: Iterable[Fact] = ()) -> int:
    """Add a turn to the session. An answer (or an observation fact) replaces an earlier answer
    to the same question; a skip withdraws it and keeps the question from being asked again.
    `collected` facts (from an uploaded archive) replace stored facts about the same thing (a
    newer measurement); other facts that contradict stored ones are an error (422), and nothing
    is changed. Returns how many stored facts the collected ones changed."""
    answered, skipped_now = answers_to_facts(answers, source="chat")
    new = list(facts) + answered
    collected = list(collected)
    remeasured: dict[tuple, list[dict]] = {}
    for f in collected:
        remeasured.setdefault(f.key(), []).append(_content(f))
    replaced = {f.name for f in new if f.type == "observation"} | set(skipped_now)
    kept = [parse_fact(d, where="session") for d in session.facts]
    kept = [f for f in kept if not (f.type == "observation" and f.name in replaced)]
    changed = sum(1 for f in kept if f.key() in remeasured and _content(f) not in remeasured[f.key()])
    kept = [f for f in kept if f.key() not in remeasured]
    merged = FactSet(kept)
    for fact in [*collected, *new]:
        merged.add(fact)
    if len(merged) > max_facts:
        raise ServiceError(413, "too_many_facts", f"the session would hold {len(merged)} facts (limit {max_facts})")
    session.facts = merged.to_json()
    answered_names = {f.name for f in new if f.type == "observation"}
    session.skipped = [q for q in dict.fromkeys([*session.skipped, *skipped_now]) if q not in answered_names]
    return changed


def _content(fact: Fact) -> dict:
    """What a fact says, without where it was read from."""
    data = fact.to_json()
    data.pop("source", None)
    return data


def _plan(session: Session, settings: Settings):
    facts = FactSet(parse_fact(d, where="session") for d in session.facts)
    diag = diagnose(facts, engine=settings.engine, lang=session.lang, rules_path=settings.rules_path)
    suggestions = plan(facts, engine=settings.engine, lang=session.lang, rules_path=settings.rules_path,
                       diag=diag, skipped=session.skipped, limit=None)
    top = dominant(diag)
    question = next((s for s in suggestions if s.kind == "question"), None)
    return facts, diag, suggestions[:SUGGESTIONS], top, question


def session_state(session: Session, settings: Settings, upload: UploadOut | None = None) -> SessionState:
    """The session as answered: its facts and its diagnosis's facts are each repeated within the
    echo budget (settings.max_echo_bytes), and the diagnosis's warnings say what was left out;
    `upload`: what an archive uploaded in this turn gave."""
    facts, diag, suggestions, top, question = _plan(session, settings)
    echoed, _, _ = echo_facts(facts.to_json(), settings.max_echo_bytes)
    return SessionState(
        session_id=session.id, lang=session.lang, turns=session.turns, created=session.created,
        updated=session.updated, expires_at=session.expires, facts=echoed, skipped=session.skipped,
        dominant=top.failure_mode if top else None, next_question=None if top else question,
        suggestions=[] if top else suggestions, diagnosis=limit_echo(diag, settings.max_echo_bytes), upload=upload)


def session_next(session: Session, settings: Settings) -> NextOut:
    _, _, suggestions, top, question = _plan(session, settings)
    return NextOut(session_id=session.id, dominant=top.failure_mode if top else None,
                   next_question=None if top else question, suggestions=[] if top else suggestions)


def state_reply(state: SessionState, fmt: str) -> Reply:
    """The session for a chat message: the diagnosis (ranking, splitting step), then what the
    upload of this turn gave, what to ask or do next, and the session's id."""
    from precdx.render.chat import BULLET, Part, bold, code, diagnosis_reply, italic, plain
    from precdx.render.text import text_reply

    zh = state.lang == "zh"
    reply = text_reply(state.diagnosis) if fmt == "text" else diagnosis_reply(state.diagnosis)
    extra: list[Part] = []
    if state.upload is not None:
        u = state.upload
        text = (f" 收集到 {u.facts} 条事实，更新 {u.replaced} 条，{len(u.warnings)} 条警告" if zh
                else f" {u.facts} facts collected, {u.replaced} updated, {len(u.warnings)} warning(s)")
        extra.append(Part("session", [[bold("📦 上传的归档：" if zh else "📦 Archive:"), plain(text)]]))
    if state.dominant:
        line = ([bold("已确定："), plain(" "), code(state.dominant)] if zh
                else [bold("Settled:"), plain(" "), code(state.dominant), plain(" dominates.")])
        extra.append(Part("session", [line], essential=True))
    elif state.next_question:
        q = state.next_question
        how = ("数值/skip" if zh else "a number or skip") if q.answer == "number" else ("是/否/skip" if zh else "yes/no/skip")
        line = ([bold("下一个问题"), plain("（"), code(q.id), plain(f"，{q.cost_label}）：{q.text} — 请回答 {how}")] if zh
                else [bold("Next question"), plain(" ("), code(q.id), plain(f", {q.cost_label}): {q.text} — answer {how}")])
        extra.append(Part("session", [line], essential=True))
    others = [s for s in state.suggestions if s.kind != "question"][:3]
    if others:
        lines = [[bold("还值得做：" if zh else "Also worth doing:")]]
        for s in others:
            line = [BULLET, italic(s.cost_label), plain(f": {s.text}")]
            if s.command:
                line += [plain(" — "), code(s.command)]
            lines.append(line)
        extra.append(Part("session", lines))
    extra.append(Part("session", [[italic("session" if not zh else "会话"), plain(" "), code(state.session_id),
                                   plain(f" · {len(state.facts)} facts · turn {state.turns}" if not zh
                                         else f" · {len(state.facts)} 条事实 · 第 {state.turns} 轮")]]))
    # after the ranking and the splitting step, before the warnings
    at = next((i for i, p in enumerate(reply.parts) if p.kind == "warnings"), len(reply.parts))
    reply.parts[at:at] = extra
    return reply
