"""A small test-only fact vocabulary for the matcher tests (registered per test module by
conftest.py and removed afterwards, so vocabulary-wide tests elsewhere never see it), and
rule-pack builders that go through the real rule schema and compiler."""
from __future__ import annotations

from typing import Any, Literal, Optional

from precdx.facts.base import REGISTRY, Bool, F, Fact, Int, Num, fact_type, parse_fact
from precdx.rulepack.compiler import CompiledPack, compile_rules
from precdx.rulepack.loader import LoadedRule, parse_rule


class TdxAlpha(Fact):
    """Test-only fact with one field of every kind."""

    x: Num | None = F("a number")
    y: Num | None = F("another number")
    n: Int | None = F("an integer")
    s: Optional[str] = F("a string")
    b: Bool | None = F("a boolean")


class TdxBeta(Fact):
    """Test-only fact with a choice field."""

    x: Num | None = F("a number")
    n: Int | None = F("an integer")
    s: Optional[str] = F("a string")
    k: Optional[Literal["p", "q", "r"]] = F("a choice")


TEST_TYPES = {"tdx_alpha": TdxAlpha, "tdx_beta": TdxBeta}


def register_types(types: dict[str, type[Fact]]) -> list[str]:
    added = []
    for name, cls in types.items():
        if name not in REGISTRY:
            fact_type(name, collectors=("user",))(cls)
            added.append(name)
    return added


def unregister_types(names: list[str]) -> None:
    for name in names:
        REGISTRY.pop(name, None)


def rule_doc(rid: str, when: dict[str, Any]) -> dict[str, Any]:
    return {"schema_version": 1, "id": rid, "name": rid.lower(), "symptom": "test.symptom",
            "when": when, "title": {"en": "t"}, "explanation": {"en": "e"}}


def make_pack(*whens: dict[str, Any], prefix: str = "TDX") -> CompiledPack:
    """Rules (one per `when`) validated by the rule schema and compiled by the real compiler."""
    loaded = [LoadedRule(parse_rule(rule_doc(f"{prefix}-{i:03d}", w), "<test>"), "<test>", 1)
              for i, w in enumerate(whens, start=1)]
    return compile_rules(loaded)


def facts(*dicts: dict[str, Any]) -> list[Fact]:
    return [parse_fact(d) for d in dicts]
