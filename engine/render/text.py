"""Plain-text report for a terminal, or for a chat that shows plain text: verdict, symptoms,
ranked hypotheses with evidence and next steps ordered by cost, near misses, warnings;
optionally capped in length at hypothesis boundaries and closed by a link to the full report
(engine/render/chat.py)."""
from __future__ import annotations

from precdx.diagnosis import Diagnosis, grade_label
from precdx.render.chat import Cap, Markup, Part, Reply, fit, plain

TEXT = Markup()

_L = {
    "en": {"verdict": "Verdict", "symptoms": "Symptoms", "hyps": "Hypotheses (best first)", "evidence": "evidence",
           "steps": "next steps", "near": "Near misses (one condition short)", "warn": "Warnings",
           "none": "No hypothesis reached the report threshold.", "refs": "references", "expected": "expected",
           "basis": "Basis", "missing": "would firm it up", "split": "Cheapest step that splits the differential",
           "grade": "evidence", "profile": "Profile", "against": "argued against by"},
    "zh": {"verdict": "结论", "symptoms": "症状", "hyps": "假设（按可能性排序）", "evidence": "证据",
           "steps": "下一步", "near": "差一个条件即可触发的规则", "warn": "警告",
           "none": "没有假设达到报告阈值。", "refs": "参考", "expected": "期望",
           "basis": "依据", "missing": "尚缺", "split": "最能区分各假设的最低成本下一步",
           "grade": "证据等级", "profile": "症状画像", "against": "反对依据"},
}


def text_reply(diag: Diagnosis, *, max_hypotheses: int = 5, verbose: bool = False) -> Reply:
    """The report as parts (engine/render/chat.py), one per section and one per hypothesis."""
    L = _L.get(diag.lang, _L["en"])
    parts: list[Part] = []

    def part(kind: str, lines: list[str], **kw) -> None:
        parts.append(Part(kind, [[plain(x)] for x in lines], **kw))

    head = [f"{L['verdict']}: {diag.verdict.upper()}", diag.summary]
    if diag.verdict_basis is not None and diag.verdict_basis.kind != "none":
        head.append(f"{L['basis']} ({diag.verdict_basis.kind}): {diag.verdict_basis.text}")
        if diag.verdict_basis.missing:
            head.append(f"  {L['missing']}: " + "; ".join(diag.verdict_basis.missing))
    part("head", head, essential=True)
    if diag.symptoms:
        lines = [f"{L['symptoms']}:"]
        for s in diag.symptoms:
            lines.append(f"  - {s.title} [{s.id}]")
            if s.evidence:
                lines.append(f"      {s.evidence[0].text}")
        part("symptoms", lines)
    if not diag.hypotheses:
        part("hypothesis", [f"{L['hyps']}:", f"  {L['none']}"], essential=True)
    for i, h in enumerate(diag.hypotheses[:max_hypotheses], 1):
        lines = [f"{L['hyps']}:"] if i == 1 else []
        lines.append(f"  {i}. {h.title}")
        lines.append(f"     {h.failure_mode}  score {h.score:.2f}  {L['grade']} {grade_label(h.grade, diag.lang)}  "
                     f"rules {', '.join(r.id for r in h.rules if r.supports)}")
        shown = set()
        for e in h.evidence:
            if e.text not in shown:
                shown.add(e.text)
                lines.append(f"     {L['evidence']}: {e.text}")
            if verbose and e.value is not None:
                exp = f" ({L['expected']} {e.expected})" if e.expected else ""
                lines.append(f"        {e.fact} = {e.value}{exp}")
        against = [r for r in h.rules if not r.supports]
        if against:  # what lowered the score: said, so the number is not a mystery
            lines.append(f"     {L['against']}: " + ", ".join(f"{r.id} {r.name} ({r.weight:.2f})" for r in against))
        if h.next_steps:
            lines.append(f"     {L['steps']}:")
            for st in h.next_steps[: (None if verbose else 4)]:
                lines.append(f"       [{st.cost_label}] {st.action}")
                if st.command:
                    lines.append(f"           $ {st.command}")
        if verbose and h.references:
            lines.append(f"     {L['refs']}: {', '.join(h.references)}")
        part("hypothesis", lines, essential=i == 1)
    if diag.split_step is not None:
        st = diag.split_step
        lines = [f"{L['split']}:", f"  [{st.cost_label}] {st.action}"]
        if st.command:
            lines.append(f"      $ {st.command}")
        if st.why:
            lines.append(f"      ({st.why})")
        part("split", lines)
    if diag.near_misses and verbose:
        part("near", [f"{L['near']}:"] + [f"  - {nm.rule}: {nm.text}" for nm in diag.near_misses[:10]])
    if diag.warnings:
        lines = [f"{L['warn']}:"]
        for w in diag.warnings:
            where = w.get("path", "")
            if w.get("line"):
                where += f":{w['line']}"
            lines.append(f"  - {where + ': ' if where else ''}{w['message']}")
        part("warnings", lines)
    return Reply(parts, max(0, len(diag.hypotheses) - max_hypotheses) if diag.hypotheses else 0, diag.lang,
                 f"precdx: {diag.verdict}")


def render_reply(reply: Reply, *, max_length: int | None = None, report_url: str | None = None) -> str:
    parts = fit(reply, TEXT, Cap(max_length) if max_length else None, report_url)
    return TEXT.join(parts).rstrip() + "\n"


def render_text(diag: Diagnosis, *, max_hypotheses: int = 5, verbose: bool = False, max_length: int | None = None,
                report_url: str | None = None) -> str:
    """The plain-text report; `max_length` caps it (characters, cut at hypothesis boundaries),
    `report_url` ends it with a link to the full report."""
    reply = text_reply(diag, max_hypotheses=max_hypotheses, verbose=verbose)
    if max_length is None and report_url is None:
        reply.hypotheses_left_out = 0  # the terminal report has always shown the top ones without a footer
    return render_reply(reply, max_length=max_length, report_url=report_url)
