"""A request's facts: validated, de-duplicated, checked for contradictions, loadable from files."""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Iterable, Iterator

from precdx.errors import PrecdxError
from precdx.facts.base import Fact, parse_fact


class FactSet:
    """An ordered set of facts. Identical facts collapse; two facts that claim different values
    for the same identity (same type and identity fields) are a contradiction."""

    def __init__(self, facts: Iterable[Fact] = ()) -> None:
        self._facts: list[Fact] = []
        self._seen: set[str] = set()
        self._by_key: dict[tuple, Fact] = {}
        for f in facts:
            self.add(f)

    @staticmethod
    def _fingerprint(fact: Fact) -> str:
        data = fact.model_dump(mode="json", exclude={"source"}, exclude_none=True)
        return json.dumps(data, sort_keys=True)

    def add(self, fact: Fact, *, strict: bool = True) -> bool:
        """Add a fact; returns False if an identical one was already there.

        With strict=True a contradiction raises PrecdxError naming both sources."""
        fp = self._fingerprint(fact)
        if fp in self._seen:
            return False
        if fact.identity:
            key = fact.key()
            prior = self._by_key.get(key)
            if prior is not None:
                if strict:
                    ident = ", ".join(f"{k}={getattr(fact, k)!r}" for k in fact.identity)
                    raise PrecdxError(
                        f"contradictory facts: two '{fact.type}' facts for {ident} disagree "
                        f"({_diff_fields(prior, fact)})",
                        path=fact.source or prior.source,
                        hint=f"first from {prior.source or 'input'}, second from {fact.source or 'input'}")
                return False
            self._by_key[key] = fact
        self._seen.add(fp)
        self._facts.append(fact)
        return True

    def extend(self, facts: Iterable[Fact], *, strict: bool = True) -> None:
        for f in facts:
            self.add(f, strict=strict)

    def of_type(self, ftype: str) -> list[Fact]:
        return [f for f in self._facts if f.type == ftype]

    def first(self, ftype: str, **where: Any) -> Fact | None:
        for f in self._facts:
            if f.type == ftype and all(getattr(f, k, None) == v for k, v in where.items()):
                return f
        return None

    def __iter__(self) -> Iterator[Fact]:
        return iter(self._facts)

    def __len__(self) -> int:
        return len(self._facts)

    def to_json(self) -> list[dict[str, Any]]:
        return [f.to_json() for f in self._facts]


def _diff_fields(a: Fact, b: Fact) -> str:
    parts = []
    for name in type(a).model_fields:
        if name == "source":
            continue
        va, vb = getattr(a, name), getattr(b, name)
        same = va == vb or (isinstance(va, float) and isinstance(vb, float) and math.isnan(va) and math.isnan(vb))
        if not same:
            parts.append(f"{name}: {va!r} vs {vb!r}")
    return "; ".join(parts) or "same values"


def load_fact_files(paths: Iterable[str | Path]) -> FactSet:
    """Read facts given as YAML or JSON: a list of facts, or a mapping with a `facts` list."""
    from precdx.yamlsafe import load_yaml_text

    facts = FactSet()
    for p in paths:
        path = Path(p)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            raise PrecdxError("facts file not found", path=str(path)) from None
        except OSError as exc:
            raise PrecdxError(f"cannot read facts file: {exc.strerror}", path=str(path)) from None
        if b"\x00" in raw:
            raise PrecdxError("facts file is binary (NUL bytes), not YAML/JSON; not UTF-8 text", path=str(path))
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise PrecdxError("facts file is not UTF-8 text (binary?)", path=str(path)) from None
        doc = load_yaml_text(text, str(path))
        if doc is None:
            raise PrecdxError("facts file is empty: expected a list of facts or a mapping with a 'facts' list",
                              path=str(path))
        items = doc.get("facts") if isinstance(doc, dict) else doc
        if isinstance(doc, dict) and "facts" not in doc:
            raise PrecdxError("expected a list of facts or a mapping with a 'facts' list", path=str(path))
        if not isinstance(items, list):
            raise PrecdxError("'facts' must be a list", path=str(path))
        for i, item in enumerate(items):
            line = getattr(item, "line", None)
            fact = parse_fact(_plain(item), where=f"{path}" + (f":{line}" if line else f" (fact #{i + 1})"))
            if fact.source is None:
                fact = fact.model_copy(update={"source": str(path)})
            facts.add(fact)
    return facts


def _plain(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_plain(v) for v in obj]
    return obj
