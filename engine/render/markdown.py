"""Markdown for chat: compact, pasteable, with the top hypotheses and their next steps."""
from __future__ import annotations

from engine.diagnosis import Diagnosis, grade_label

_ICON = {"aligned": "✅", "misaligned": "❌", "inconclusive": "❔"}


def render_markdown(diag: Diagnosis, *, max_hypotheses: int = 3) -> str:
    zh = diag.lang == "zh"
    out = [f"**{_ICON.get(diag.verdict, '')} {diag.verdict}** — {diag.summary}"]
    basis = diag.verdict_basis
    if basis is not None and basis.kind in ("accepted", "provisional") and basis.missing:
        out.append(("_尚缺：" if zh else "_Would firm it up: ") + "; ".join(basis.missing) + "_")
    out.append("")
    if diag.symptoms:
        out.append(("**症状：** " if zh else "**Symptoms:** ") + "; ".join(s.title for s in diag.symptoms))
        out.append("")
    for i, h in enumerate(diag.hypotheses[:max_hypotheses], 1):
        out.append(f"{i}. **{h.title}** (`{h.failure_mode}`, {h.score:.2f}, {grade_label(h.grade, diag.lang)})")
        for text in dict.fromkeys(e.text for e in h.evidence):
            out.append(f"   - {text}")
        for st in h.next_steps[:3]:
            cmd = f" — `{st.command}`" if st.command else ""
            out.append(f"   - ▶ *{st.cost_label}*: {st.action}{cmd}")
    if not diag.hypotheses:
        out.append("_没有达到报告阈值的假设。_" if zh else "_No hypothesis reached the report threshold._")
    if diag.split_step is not None:
        st = diag.split_step
        cmd = f" — `{st.command}`" if st.command else ""
        out.append("")
        out.append(("**下一步（最能区分）：** " if zh else "**Next (splits the differential):** ")
                   + f"*{st.cost_label}*: {st.action}{cmd}")
    if diag.warnings:
        out.append("")
        out.append(("⚠️ " + str(len(diag.warnings)) + (" 条警告" if zh else " warning(s): "))
                   + "; ".join(w["message"] for w in diag.warnings[:3]))
    return "\n".join(out).rstrip() + "\n"
