"""The fact vocabulary rendered for people and tools (docs, `precdx facts --vocabulary`)."""
from __future__ import annotations

from precdx.facts.base import REGISTRY


def _former(spec) -> dict[str, list[str]]:
    """Current field name -> its former names (still accepted as input)."""
    out: dict[str, list[str]] = {}
    for old, new in spec.renamed.items():
        out.setdefault(new, []).append(old)
    return out


def vocabulary_json() -> dict:
    out = {}
    for name in sorted(REGISTRY):
        spec = REGISTRY[name]
        former = _former(spec)
        out[name] = {
            "doc": spec.doc, "collectors": list(spec.collectors), "identity": list(spec.identity),
            "fields": {f.name: {"kind": f.kind, "description": f.description, "unit": f.unit,
                                "matchable": f.match, **({"choices": list(f.choices)} if f.choices else {}),
                                **({"former_names": former[f.name]} if f.name in former else {})}
                       for f in spec.fields.values()},
        }
    return out


def vocabulary_text() -> str:
    lines = []
    for name, spec in sorted(REGISTRY.items()):
        former = _former(spec)
        lines.append(f"{name}  (from: {', '.join(spec.collectors)})")
        if spec.doc:
            lines.append(f"    {spec.doc.splitlines()[0]}")
        for f in spec.fields.values():
            unit = f" [{f.unit}]" if f.unit else ""
            choices = f" one of {', '.join(f.choices)}" if f.choices else ""
            info = "" if f.match else " (descriptive)"
            was = f" (was: {', '.join(former[f.name])})" if f.name in former else ""
            lines.append(f"    {f.name}: {f.kind}{unit}{info}{was} — {f.description}{choices}")
        lines.append("")
    return "\n".join(lines)
