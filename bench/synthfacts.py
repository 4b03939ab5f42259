"""Synthetic diagnosis requests for bench/engine and the equivalence tests: `n` facts of the
types the rule pack tests, with values drawn around the literals the rules compare against so
that rules fire (and many miss by one condition). No fact types are registered here."""
from __future__ import annotations

import math
import random
from collections import defaultdict
from typing import Any

from precdx.errors import PrecdxError
from precdx.facts import REGISTRY, FactSet, parse_fact
from precdx.facts.base import Fact
from precdx.rulepack.compiler import CompiledPack


def _literals(pack: CompiledPack) -> dict[tuple[str, str], list[Any]]:
    out: dict[tuple[str, str], list[Any]] = defaultdict(list)
    for rule in pack.rules:
        for alt in rule.alternatives:
            for pat in (*alt.positives, *alt.negatives):
                for t in pat.tests:
                    if t.ref is not None or t.op in ("exists", "nonfinite", "matches"):
                        continue
                    values = t.value if isinstance(t.value, tuple) else (t.value,)
                    out[(pat.fact_type, t.field)].extend(v for v in values if v is not None)
    return out


def _value(rng: random.Random, spec, literals: list[Any]) -> Any:
    if spec.choices:
        return rng.choice(spec.choices)
    if spec.kind == "boolean":
        return rng.random() < 0.5
    if spec.kind == "string":
        return rng.choice(literals) if literals and rng.random() < 0.7 else f"v{rng.randrange(50)}"
    if rng.random() < 0.02:
        return "nan"
    nums = [v for v in literals if isinstance(v, (int, float)) and math.isfinite(v)]
    base = rng.choice(nums) if nums and rng.random() < 0.8 else rng.uniform(-2, 10)
    value = base * rng.choice([0.5, 0.9, 1.0, 1.1, 2.0, 10.0]) if rng.random() < 0.7 else base
    return int(round(value)) if spec.kind == "integer" else float(value)


def synthesise(pack: CompiledPack, n: int, rng: random.Random) -> list[Fact]:
    """`n` facts of the types the pack tests (contradictions and duplicates are skipped the way
    FactSet does, so the list is a valid request)."""
    literals = _literals(pack)
    types = sorted({p.fact_type for r in pack.rules for a in r.alternatives for p in (*a.positives, *a.negatives)})
    fs = FactSet()
    for _ in range(n * 200):
        if len(fs) >= n:
            break
        ftype = rng.choice(types)
        data: dict[str, Any] = {"type": ftype}
        for name, spec in REGISTRY[ftype].fields.items():
            if spec.match and rng.random() < 0.85:
                data[name] = _value(rng, spec, literals.get((ftype, name), []))
        try:
            fs.add(parse_fact(data), strict=False)
        except PrecdxError:
            continue
    return list(fs)
