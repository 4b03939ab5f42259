"""`precdx explain`: a rule (conditions, effect, next steps) or a failure mode (kb entry and the
rules that diagnose it)."""
from __future__ import annotations

import json

from precdx.errors import PrecdxError


def explain(name: str, *, lang: str = "en", fmt: str = "text") -> str:
    from precdx.diagnosis import load_pack
    from precdx.kb import load_kb

    pack = load_pack()
    rules = pack.by_id()
    kb = load_kb()
    name = _canonical(name, rules, kb)
    if name in rules:
        return _explain_rule(rules[name], lang, fmt)
    if name in kb:
        return _explain_mode(kb[name], [r for r in pack.rules if name in r.rule.failure_modes or name in r.rule.against],
                             lang, fmt)
    import difflib
    near = difflib.get_close_matches(name, list(rules) + list(kb), n=3)
    raise PrecdxError(f"no rule or failure mode named {name!r}",
                      hint=("did you mean " + ", ".join(near) + "?") if near else "see `precdx rules list`")


def _canonical(name: str, *spaces) -> str:
    """The id as spelt in the pack when `name` differs only in case (cfg-001 -> CFG-001)."""
    if any(name in space for space in spaces):
        return name
    low = name.strip().lower()
    for space in spaces:
        hits = [k for k in space if k.lower() == low]
        if len(hits) == 1:
            return hits[0]
    return name


def _explain_rule(cr, lang: str, fmt: str) -> str:
    r = cr.rule
    if fmt == "json":
        return json.dumps({"path": cr.path, "line": cr.line, **r.model_dump(by_alias=True, exclude_none=True)},
                          indent=2, ensure_ascii=False)
    lines = [f"{r.id} ({r.name}) — {r.title.get(lang)}", f"  file: {cr.path}:{cr.line or 1}",
             f"  status: {r.status}   stage: {r.stage}   precision: {r.precision}   severity: {r.severity}"]
    if r.failure_modes:
        lines.append(f"  supports: {', '.join(r.failure_modes)}")
    if r.against:
        lines.append(f"  argues against: {', '.join(r.against)}")
    if r.symptom:
        lines.append(f"  symptom: {r.symptom}")
    lines.append("  fires when:")
    for k, alt in enumerate(cr.alternatives):
        if len(cr.alternatives) > 1:
            lines.append(f"   alternative {k + 1}:")
        for p in alt.positives:
            conds = " and ".join(t.describe() for t in p.tests) or "any"
            lines.append(f"    - a {p.fact_type} fact ({p.alias}) with {conds}")
        for n in alt.negatives:
            conds = " and ".join(t.describe() for t in n.tests) or "any"
            lines.append(f"    - and no {n.fact_type} fact with {conds}")
    lines.append(f"  explanation: {r.explanation.get(lang)}")
    for st in r.next_steps:
        only = f" ({'/'.join(st.device)} only)" if st.device else ""
        lines.append(f"  next [{st.cost}]{only}: {st.action.get(lang)}" + (f"\n      $ {st.command}" if st.command else ""))
    for fp in r.false_positives:
        lines.append(f"  known false positive: {fp.get(lang)}")
    if r.references:
        lines.append(f"  references: {', '.join(r.references)}")
    return "\n".join(lines) + "\n"


def _explain_mode(entry, rules, lang: str, fmt: str) -> str:
    if fmt == "json":
        data = entry.model_dump(mode="json")
        data["rules"] = [r.id for r in rules]
        return json.dumps(data, indent=2, ensure_ascii=False)
    lines = [f"{entry.id} — {entry.text('title', lang)}"]
    heads = {"meaning": "含义", "impact": "影响", "diagnosis": "诊断", "mitigation": "缓解"} if lang == "zh" else {}
    for section in ("meaning", "impact", "diagnosis", "mitigation"):
        head = heads.get(section, section.capitalize())
        lines.append(f"\n{head}:\n  " + entry.text(section, lang).strip().replace("\n", "\n  "))
    lines.append(("\n规则：" if lang == "zh" else "\nRules: ")
                 + (", ".join(f"{r.id} ({r.rule.name})" for r in rules) or "none"))
    return "\n".join(lines) + "\n"
