"""Named thresholds in rules: the kb entry of a failure mode declares them once
(`thresholds: {name: value}` in kb/<area>/<mode>.yaml, besides the acceptance tolerances of
kb/verdict/aligned.within_noise.yaml that every rule may use), and rules name them:

    where: {first_step_rel_err: {ge: {threshold: first_step_rel_err}}}          # a condition
    where: {rel_gap: {lt: {threshold: downstream_rel_gap, scale: -1}}}           # scaled
    explanation: {en: "first-step error above {threshold.first_step_rel_err:.1%}"}  # a text

A rule's mode is its file's name (rules/<area>/<mode>.yaml); symptom rules see the tolerances
only. The loader puts the numbers in before the rule is validated, so the matchers, the
explanations and `precdx explain` see plain numbers; an unknown name is an error at file:line."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from precdx.errors import PrecdxError
from precdx.yamlsafe import line_of

TEXT = re.compile(r"\{threshold\.([A-Za-z_]\w*)(?::([^{}]*))?\}")
_TEXT_KEYS = ("title", "explanation")
_STEP_TEXT_KEYS = ("action", "command", "why")


def mode_of(path: str | Path) -> str | None:
    """The failure mode a rule file belongs to (its name without .yaml)."""
    name = Path(path).name
    return name[: -len(".yaml")] if name.endswith(".yaml") else None


def scope(path: str | Path) -> dict[str, tuple[float, str]]:
    from precdx.kb import thresholds_for

    try:
        return thresholds_for(mode_of(path))
    except PrecdxError:
        return {}  # no knowledge base: a rule that names a threshold fails below, naming it


def _number(value: float) -> int | float:
    return int(value) if float(value).is_integer() and abs(value) < 2 ** 53 else value


def substitute(doc: Any, path: str | Path, known: dict[str, tuple[float, str]] | None = None
               ) -> tuple[Any, list[str]]:
    """The rule mapping with every threshold reference replaced by its number; also the names
    used. Raises PrecdxError (file:line) for an unknown name or a malformed reference."""
    used: list[str] = []
    if not isinstance(doc, dict):
        return doc, used
    table = scope(path) if known is None else known

    def value_of(name: Any, line: int | None) -> float:
        if not isinstance(name, str) or name not in table:
            rid = doc.get("id", "?")
            have = ", ".join(sorted(table)) or "none"
            raise PrecdxError(f"rule {rid}: unknown threshold {name!r} (this rule's mode and the "
                              f"acceptance tolerances declare: {have})", path=str(path), line=line)
        used.append(name)
        return table[name][0]

    when = doc.get("when")
    for part in ("all", "any", "none"):
        pats = when.get(part) if isinstance(when, dict) else None
        for pat in pats if isinstance(pats, list) else ():
            where = pat.get("where") if isinstance(pat, dict) else None
            if not isinstance(where, dict):
                continue
            for cond in where.values():
                if not isinstance(cond, dict):
                    continue
                for op, val in list(cond.items()):
                    if isinstance(val, dict) and "threshold" in val:
                        extra = set(val) - {"threshold", "scale"}
                        scale = val.get("scale", 1)
                        if extra or isinstance(scale, bool) or not isinstance(scale, (int, float)):
                            raise PrecdxError(f"rule {doc.get('id', '?')}: a threshold reference is "
                                              "{threshold: NAME, scale: NUMBER}", path=str(path),
                                              line=line_of(pat, "where"))
                        cond[op] = _number(value_of(val["threshold"], line_of(pat, "where")) * scale)

    def text(value: Any, node: Any) -> Any:
        if isinstance(value, str) and "{threshold." in value:
            return TEXT.sub(lambda m: format(value_of(m.group(1), line_of(node)), m.group(2) or "g"), value)
        if isinstance(value, dict):
            for k in list(value):
                value[k] = text(value[k], value)
        return value

    for key in _TEXT_KEYS:
        if key in doc:
            doc[key] = text(doc[key], doc)
    for step in doc.get("next_steps") or ():
        if isinstance(step, dict):
            for key in _STEP_TEXT_KEYS:
                if key in step:
                    step[key] = text(step[key], step)
    for fp in doc.get("false_positives") or ():
        text(fp, fp)
    return doc, used
