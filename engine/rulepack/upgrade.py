"""Rules written against an older fact vocabulary: former field names (declared with
`F(was=...)` in engine/facts/) are rewritten to the current ones before a rule is validated,
in conditions (`where` keys), joins (`ref: ALIAS.FIELD`), `strength.from` and the placeholders
of the texts. Each rewrite is noted so that `precdx rules lint` can ask for the new name
(R020); the rule itself loads and behaves as before."""
from __future__ import annotations

import re
from typing import Any

from precdx.facts import REGISTRY
from precdx.yamlsafe import LineDict

_PLACEHOLDER = re.compile(r"\{([A-Za-z_]\w*)\.([A-Za-z_]\w*)((?::[^{}]*)?)\}")
_TEXT_KEYS = ("title", "explanation")


def _renamed(ftype: str | None, name: str) -> str:
    spec = REGISTRY.get(ftype) if isinstance(ftype, str) else None
    return spec.renamed.get(name, name) if spec else name


def _rekey(mapping: dict, renames: dict[str, str]) -> dict:
    """The mapping with keys renamed, order and (for LineDict) key lines kept."""
    out = LineDict() if isinstance(mapping, LineDict) else {}
    if isinstance(mapping, LineDict):
        out.line = mapping.line
    for key, value in mapping.items():
        new = renames.get(key, key)
        out[new] = value
        if isinstance(mapping, LineDict) and key in mapping.key_lines:
            out.key_lines[new] = mapping.key_lines[key]
    return out


def upgrade_rule(doc: Any) -> tuple[Any, list[str]]:
    """The rule mapping with former field names replaced; the list says what was replaced
    ("loss_compare.baseline_nan_count -> against_nan_count")."""
    notes: list[str] = []
    if not isinstance(doc, dict) or not any(spec.renamed for spec in REGISTRY.values()):
        return doc, notes
    when = doc.get("when")
    if not isinstance(when, dict):
        return doc, notes
    aliases: dict[str, str] = {}
    for part in ("all", "any", "none"):
        for pat in when.get(part) or ():
            if isinstance(pat, dict) and isinstance(pat.get("fact"), str) and isinstance(pat.get("as"), str):
                aliases[pat["as"]] = pat["fact"]

    def ref(text: str, own: tuple[Any, Any] = (None, None)) -> str:
        alias, _, name = text.partition(".")
        ftype = own[1] if alias == own[0] else aliases.get(alias)
        new = _renamed(ftype, name)
        if new != name:
            notes.append(f"{ftype}.{name} -> {new}")
            return f"{alias}.{new}"
        return text

    for part in ("all", "any", "none"):
        pats = when.get(part)
        if not isinstance(pats, list):
            continue
        for i, pat in enumerate(pats):
            if not isinstance(pat, dict) or not isinstance(pat.get("where"), dict):
                continue
            where = pat["where"]
            renames = {k: _renamed(pat.get("fact"), k) for k in where if isinstance(k, str)}
            renames = {k: v for k, v in renames.items() if k != v}
            for old, new in renames.items():
                notes.append(f"{pat.get('fact')}.{old} -> {new}")
            if renames:
                where = _rekey(where, renames)
                pat["where"] = where
            for cond in where.values():
                if isinstance(cond, dict):
                    for op, value in cond.items():
                        if isinstance(value, dict) and isinstance(value.get("ref"), str):
                            value["ref"] = ref(value["ref"], (pat.get("as"), pat.get("fact")))
    strength = doc.get("strength")
    if isinstance(strength, dict) and isinstance(strength.get("from"), str):
        strength["from"] = ref(strength["from"])

    def text(value: Any) -> Any:
        if isinstance(value, str):
            return _PLACEHOLDER.sub(lambda m: "{" + ref(f"{m.group(1)}.{m.group(2)}") + m.group(3) + "}", value)
        if isinstance(value, dict):
            for k in list(value):
                value[k] = text(value[k])
        return value

    for key in _TEXT_KEYS:
        if key in doc:
            doc[key] = text(doc[key])
    for step in doc.get("next_steps") or ():
        if isinstance(step, dict):
            for key in ("action", "command", "why"):
                if key in step:
                    step[key] = text(step[key])
    return doc, notes
