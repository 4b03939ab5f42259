"""Plain-text report for a terminal: verdict, symptoms, ranked hypotheses with evidence and
next steps ordered by cost, near misses, warnings."""
from __future__ import annotations

from engine.diagnosis import Diagnosis, grade_label

_L = {
    "en": {"verdict": "Verdict", "symptoms": "Symptoms", "hyps": "Hypotheses (best first)", "evidence": "evidence",
           "steps": "next steps", "near": "Near misses (one condition short)", "warn": "Warnings",
           "none": "No hypothesis reached the report threshold.", "refs": "references", "expected": "expected",
           "basis": "Basis", "missing": "would firm it up", "split": "Cheapest step that splits the differential",
           "grade": "evidence", "profile": "Profile"},
    "zh": {"verdict": "结论", "symptoms": "症状", "hyps": "假设（按可能性排序）", "evidence": "证据",
           "steps": "下一步", "near": "差一个条件即可触发的规则", "warn": "警告",
           "none": "没有假设达到报告阈值。", "refs": "参考", "expected": "期望",
           "basis": "依据", "missing": "尚缺", "split": "最能区分各假设的最低成本下一步",
           "grade": "证据等级", "profile": "症状画像"},
}


def render_text(diag: Diagnosis, *, max_hypotheses: int = 5, verbose: bool = False) -> str:
    L = _L.get(diag.lang, _L["en"])
    out: list[str] = [f"{L['verdict']}: {diag.verdict.upper()}", diag.summary]
    if diag.verdict_basis is not None and diag.verdict_basis.kind != "none":
        out.append(f"{L['basis']} ({diag.verdict_basis.kind}): {diag.verdict_basis.text}")
        if diag.verdict_basis.missing:
            out.append(f"  {L['missing']}: " + "; ".join(diag.verdict_basis.missing))
    out.append("")
    if diag.symptoms:
        out.append(f"{L['symptoms']}:")
        for s in diag.symptoms:
            out.append(f"  - {s.title} [{s.id}]")
            if s.evidence:
                out.append(f"      {s.evidence[0].text}")
        out.append("")
    out.append(f"{L['hyps']}:")
    if not diag.hypotheses:
        out.append(f"  {L['none']}")
    for i, h in enumerate(diag.hypotheses[:max_hypotheses], 1):
        out.append(f"  {i}. {h.title}")
        out.append(f"     {h.failure_mode}  score {h.score:.2f}  {L['grade']} {grade_label(h.grade, diag.lang)}  "
                   f"rules {', '.join(r.id for r in h.rules if r.supports)}")
        shown = set()
        for e in h.evidence:
            if e.text not in shown:
                shown.add(e.text)
                out.append(f"     {L['evidence']}: {e.text}")
            if verbose and e.value is not None:
                exp = f" ({L['expected']} {e.expected})" if e.expected else ""
                out.append(f"        {e.fact} = {e.value}{exp}")
        if h.next_steps:
            out.append(f"     {L['steps']}:")
            for st in h.next_steps[: (None if verbose else 4)]:
                out.append(f"       [{st.cost_label}] {st.action}")
                if st.command:
                    out.append(f"           $ {st.command}")
        if verbose and h.references:
            out.append(f"     {L['refs']}: {', '.join(h.references)}")
        out.append("")
    if diag.split_step is not None:
        st = diag.split_step
        out.append(f"{L['split']}:")
        out.append(f"  [{st.cost_label}] {st.action}")
        if st.command:
            out.append(f"      $ {st.command}")
        if st.why:
            out.append(f"      ({st.why})")
        out.append("")
    if diag.near_misses and verbose:
        out.append(f"{L['near']}:")
        for nm in diag.near_misses[:10]:
            out.append(f"  - {nm.rule}: {nm.text}")
        out.append("")
    if diag.warnings:
        out.append(f"{L['warn']}:")
        for w in diag.warnings:
            where = w.get("path", "")
            if w.get("line"):
                where += f":{w['line']}"
            out.append(f"  - {where + ': ' if where else ''}{w['message']}")
    return "\n".join(out).rstrip() + "\n"
