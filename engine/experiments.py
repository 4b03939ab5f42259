"""Declared experiments: a difference the user made on purpose is the trigger, not the cause.

`precdx diagnose --changed zero_stage` (or `changed: [zero_stage]` in the case folder's
case.yaml, or `declared_change` facts over HTTP) marks a difference as the experiment. The
checklist rules that would name that very difference as the root cause are set aside, and the
hypotheses become the mechanisms known to depend on the knob (engine/data/mechanisms.yaml): ZeRO
stage -> gradient reduction / partitioning / overlap buffers; context or sequence parallel ->
per-token loss normalisation; gradient accumulation -> loss normalisation; a library version ->
that library's regressions (read its changelog between the two versions).

Without a declaration, a single differing knob plus a symptom is reported the same way next to
the checklist hypothesis: "the difference that triggers it", with the mechanisms behind it.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from precdx.yamlsafe import load_yaml_file

DECLARED_WEIGHT = 0.5      # a mechanism behind a declared change, with a symptom established
UNDECLARED_WEIGHT = 0.3    # a mechanism behind the only differing knob
DIFF_TYPES = {"config_diff": "name", "env_diff": "name", "library_diff": "package"}


@dataclass(frozen=True)
class Mechanism:
    mode: str
    why_en: str
    why_zh: str


def _norm(key: Any) -> str:
    return str(key or "").strip().lstrip("-").replace("-", "_").lower()


def canonical_key(raw: str) -> str:
    """What the user wrote (`--context-parallel-size`, `cp`, `deepspeed`) -> the canonical name."""
    from precdx.collectors.checklist.aliases import canonical

    key = _norm(raw)
    try:
        canon, _known = canonical(raw.strip())
    except Exception:  # an alias table problem must not stop a diagnosis
        return key
    return _norm(canon) if canon else key


@dataclass(frozen=True)
class _Entry:
    keys: frozenset[str]
    patterns: tuple[re.Pattern, ...]
    library: bool
    mechanisms: tuple[Mechanism, ...]
    consequences: frozenset[str] = frozenset()


@functools.lru_cache(maxsize=1)
def _table() -> tuple[_Entry, ...]:
    raw = load_yaml_file(str(Path(__file__).with_name("data") / "mechanisms.yaml"))
    out = []
    for item in raw["mechanisms"]:
        mechs = tuple(Mechanism(m["mode"], m["why"]["en"], m["why"]["zh"]) for m in item["modes"])
        out.append(_Entry(frozenset(_norm(k) for k in item.get("keys", [])),
                          tuple(re.compile(p) for p in item.get("patterns", [])), bool(item.get("library")), mechs,
                          frozenset(item.get("consequences", []))))
    return tuple(out)


def _entry_for(key: str, *, library: bool) -> _Entry | None:
    key = _norm(key)
    table = _table()
    if library:
        return next((e for e in table if e.library), None)
    exact = next((e for e in table if key in e.keys), None)
    if exact is not None:
        return exact
    return next((e for e in table if any(p.search(key) for p in e.patterns)), None)


def mechanisms_for(key: str, *, library: bool) -> tuple[Mechanism, ...]:
    """The mechanisms behind a knob: an exact key first, then the first entry whose pattern matches."""
    entry = _entry_for(key, library=library)
    return entry.mechanisms if entry is not None else ()


def consequence_types(declared: set[str]) -> dict[str, str]:
    """Fact types whose differences follow from a declared change -> the declared key."""
    out: dict[str, str] = {}
    for key in sorted(declared):
        entry = _entry_for(key, library=False)
        for ftype in (entry.consequences if entry is not None else ()):
            out.setdefault(ftype, key)
    return out


@dataclass
class Trigger:
    key: str
    fact: Any | None          # the diff fact that shows the difference (None: declared, not seen)
    declared: bool
    library: bool

    def describe(self, lang: str) -> str:
        zh = lang == "zh"
        if self.fact is not None:
            ftype = getattr(self.fact, "type", "")
            if ftype == "library_diff":
                b, t = getattr(self.fact, "baseline", None), getattr(self.fact, "target", None)
            else:
                b, t = getattr(self.fact, "baseline", None), getattr(self.fact, "target", None)
            diff = (f"'{self.key}'：标杆 {b}，目标 {t}" if zh else f"'{self.key}' differs: baseline {b}, target {t}")
        else:
            diff = f"'{self.key}'"
        if self.declared:
            return diff + ("（您声明的有意改动：这是触发条件，不是根因）" if zh
                           else " (your declared change: the trigger, not the root cause)")
        return diff + ("（两侧唯一的差异：很可能是触发条件）" if zh
                       else " (the only difference between the runs: likely the trigger)")


def declared_keys(facts: Iterable[Any]) -> set[str]:
    keys = {_norm(getattr(f, "name", "")) for f in facts if getattr(f, "type", None) == "declared_change"}
    keys.discard("")
    return keys


def diff_key(fact: Any) -> str | None:
    field = DIFF_TYPES.get(getattr(fact, "type", None))
    if field is None:
        return None
    if getattr(fact, "role", "target") not in (None, "target"):
        return None
    value = getattr(fact, field, None)
    return _norm(value) if value else None


def is_declared(fact: Any, declared: set[str]) -> bool:
    key = diff_key(fact)
    if key is None:
        return False
    if key in declared:
        return True
    # a library given with '_' or '-' (torch_npu / torch-npu) matches either way
    return getattr(fact, "type", None) == "library_diff" and key.replace("_", "-") in {d.replace("_", "-") for d in declared}


def triggers(facts: list[Any], declared: set[str], *, symptomatic: bool) -> list[Trigger]:
    """Declared changes (always), or the only relevant differing knob when a symptom is established."""
    out: list[Trigger] = []
    seen: set[str] = set()
    diffs = [f for f in facts if diff_key(f) is not None and getattr(f, "relevant", True) is not False
             and not getattr(f, "path_only", False)]
    for f in diffs:
        if is_declared(f, declared):
            key = diff_key(f)
            if key not in seen:
                seen.add(key)
                out.append(Trigger(key, f, True, getattr(f, "type", None) == "library_diff"))
    for key in sorted(declared - seen):
        out.append(Trigger(key, None, True, False))
    if not declared and symptomatic:
        relevant = [f for f in diffs if getattr(f, "type", None) != "env_diff"]
        if len(relevant) == 1:
            f = relevant[0]
            out.append(Trigger(diff_key(f), f, False, getattr(f, "type", None) == "library_diff"))
    return out
