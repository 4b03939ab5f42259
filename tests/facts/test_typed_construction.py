"""Facts are built through their typed models: `ConfigDiff.of(...)` (or, in code not moved yet,
`make("config_diff", ...)`). A static check over engine/ -- mypy-like, without running the
collectors -- finds every such call and holds its keywords against the model's fields, so a
misspelt or removed field fails here rather than on the one input that reaches the call."""
from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

from precdx.errors import PrecdxError
from precdx.facts import REGISTRY, make
from precdx.facts.checklist import ConfigDiff

ENGINE = Path(__file__).resolve().parents[2] / "engine"
BY_CLASS = {spec.model.__name__: name for name, spec in REGISTRY.items()}


@functools.lru_cache(maxsize=1)
def _calls() -> tuple[tuple[str, str, frozenset, str], ...]:
    """(file:line, fact type, keyword names, how) of every typed or by-name fact construction."""
    return tuple(_scan())


def _scan():
    for path in sorted(ENGINE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            where = f"{path.relative_to(ENGINE.parent)}:{node.lineno}"
            keys = frozenset(k.arg for k in node.keywords if k.arg is not None)
            if isinstance(f, ast.Attribute) and f.attr == "of" and isinstance(f.value, ast.Name) \
                    and f.value.id in BY_CLASS:
                yield where, BY_CLASS[f.value.id], keys, "typed"
            elif isinstance(f, ast.Name) and f.id == "make" and node.args \
                    and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                yield where, node.args[0].value, keys, "by name"


def test_every_fact_construction_uses_fields_of_its_type():
    calls = list(_calls())
    assert sum(1 for c in calls if c[3] == "typed") >= 12, "the checklist collectors build typed facts"
    bad = []
    for where, ftype, keys, how in calls:
        spec = REGISTRY.get(ftype)
        if spec is None:
            bad.append(f"{where}: unknown fact type {ftype!r}")
            continue
        unknown = keys - set(spec.fields) - set(spec.renamed) - {"source"}
        if unknown:
            bad.append(f"{where}: {ftype} ({how}) has no field(s) {sorted(unknown)}")
    assert not bad, "\n".join(bad)


def test_the_checklist_collectors_build_typed_facts_only():
    by_name = [where for where, _, _, how in _calls() if how == "by name" and "collectors/checklist" in where]
    assert not by_name, by_name


def test_typed_construction_validates_like_the_vocabulary():
    fact = ConfigDiff.of(pair="target~baseline", role="target", against_role="baseline", name="lr",
                         category="hyperparameter", baseline="1", target="2", presence="both",
                         relevant=True, rel_change=None)
    assert isinstance(fact, ConfigDiff) and fact.type == "config_diff" and fact.rel_change is None
    assert fact == make("config_diff", **{k: v for k, v in fact.model_dump().items() if k != "type"})
    with pytest.raises(PrecdxError, match=r"config_diff\.colour"):
        ConfigDiff.of(pair="target~baseline", role="target", colour="red")
    with pytest.raises(PrecdxError, match="role"):
        ConfigDiff.of(pair="target~baseline", role="nobody")
