"""Property: the strict YAML loader, the fact loader and the rule loader (with the compiler) raise
nothing but PrecdxError on any input; facts that load survive serialisation, the matcher and the
renderers; mutated rules from the shipped pack either compile or fail with file:line."""
from __future__ import annotations

import pytest

import copy
import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from precdx.diagnosis import diagnose
from precdx.errors import PrecdxError
from precdx.facts import REGISTRY, FactSet, load_fact_files
from precdx.facts.base import match_dict
from precdx.modes import mode_catalog
from precdx.render import render
from precdx.rulepack.compiler import compile_rules
from precdx.rulepack.loader import load_rule_file, rule_files
from precdx.yamlsafe import load_yaml_file, load_yaml_text

from .strategies import bounded, dumps, json_values, junk_text, numbers_as_text

pytestmark = pytest.mark.slow  # trains, dumps or fuzzes: outside the fast lane (pytest -m 'not slow')

YAML_PIECES = ["a", "b", ":", ": ", " ", "\n", "  ", "- ", "[", "]", "{", "}", ",", "&x ", "*x", "&y ", "*y",
               "!!str ", "!!int ", "!!float ", "!!binary ", "!!set ", "!!python/object:os.system ", "!x ", "<<: ",
               "? ", "|", ">", "'", '"', "#", "%YAML 1.1\n", "---\n", "...\n", "1e999", ".nan", "0x" + "f" * 30,
               "2001-02-30", "~", "null", "\t", "\\", "\x00"]
yaml_text = st.one_of(st.lists(st.sampled_from(YAML_PIECES), max_size=50).map("".join), junk_text)
TYPES = sorted(REGISTRY)


def _good(spec) -> st.SearchStrategy:
    """A well-typed value for one fact field (NaN/Inf and extreme values included)."""
    if spec.choices:
        return st.sampled_from(list(spec.choices))
    if spec.kind == "number":
        return st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(["nan", "inf", "-inf"]))
    if spec.kind == "integer":
        return st.integers(min_value=-(2 ** 63 - 1), max_value=2 ** 63 - 1)
    if spec.kind == "boolean":
        return st.booleans()
    return st.one_of(st.sampled_from(["target", "baseline", "target~baseline", "lr", "Functional.gelu"]), junk_text)


def _value(spec) -> st.SearchStrategy:
    """A mostly well-typed value for one fact field, sometimes a hostile one."""
    good = _good(spec)
    return st.one_of(good, good, good, json_values, numbers_as_text, st.integers().map(lambda i: i * 2 ** 64))


@st.composite
def valid_fact(draw) -> dict[str, Any]:
    """A fact of a known type with every required field and some optional ones, well typed."""
    spec = REGISTRY[draw(st.sampled_from(TYPES))]
    required = [n for n, f in spec.model.model_fields.items() if f.is_required() and n in spec.fields]
    optional = sorted(set(spec.fields) - set(required))
    names = required + draw(st.lists(st.sampled_from(optional), unique=True)) if optional else required
    return {"type": spec.name, **{n: draw(_good(spec.fields[n])) for n in names}}


@st.composite
def fact_dict(draw) -> dict[str, Any]:
    ftype = draw(st.one_of(st.sampled_from(TYPES), st.sampled_from(TYPES), junk_text))
    spec = REGISTRY.get(ftype)
    out: dict[str, Any] = {"type": ftype}
    if spec is None:
        return out
    for name in draw(st.lists(st.sampled_from(sorted(spec.fields)), unique=True, max_size=len(spec.fields))):
        out[name] = draw(_value(spec.fields[name]))
    if draw(st.integers(0, 9)) == 0:
        out[draw(junk_text)] = draw(json_values)
    return out


@bounded(800)
@given(yaml_text)
def test_strict_yaml_raises_only_precdx_errors(text: str) -> None:
    try:
        load_yaml_text(text, "fuzz.yaml")
    except PrecdxError as exc:
        assert exc.path == "fuzz.yaml"


@bounded(300)
@given(st.one_of(yaml_text, st.lists(fact_dict(), max_size=6).map(lambda fs: dumps({"facts": fs}))))
def test_fact_loader_raises_only_precdx_errors(text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "facts.yaml"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        try:
            facts = load_fact_files([path])
        except PrecdxError as exc:
            assert exc.path and str(path) in exc.path
            return
        json.dumps(facts.to_json())
        for fact in facts:
            match_dict(fact)


@bounded(80)
@given(st.lists(valid_fact(), min_size=1, max_size=8))
def test_loaded_facts_survive_diagnosis_and_rendering(items: list[dict]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "facts.json"
        path.write_text(dumps({"facts": items}), encoding="utf-8", errors="surrogatepass")
        try:
            facts = load_fact_files([path])
        except PrecdxError:
            return
    diag = diagnose(FactSet(facts), engine="python")
    for fmt in ("json", "text", "markdown"):
        render(diag, fmt)


_RULE_DOCS = [(path, load_yaml_file(str(path))) for path in rule_files()]
_RULES = [rule for _, doc in _RULE_DOCS for rule in (doc["rules"] if "rules" in doc else [doc])]
_MODES = set(mode_catalog()) or None


def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, prefix + (i,))
    return out


def _plain(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_plain(v) for v in node]
    return node


@st.composite
def mutated_rule(draw) -> dict:
    rule = _plain(copy.deepcopy(draw(st.sampled_from(_RULES))))
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(_paths(rule)[1:]))
        parent = rule
        for part in path[:-1]:
            parent = parent[part]
        action = draw(st.sampled_from(["replace", "delete", "rename"]))
        key = path[-1]
        if action == "delete":
            del parent[key]
        elif action == "rename" and isinstance(parent, dict):
            parent[draw(junk_text)] = parent.pop(key)
        else:
            parent[key] = draw(st.one_of(json_values, numbers_as_text, st.sampled_from(
                ["{l.nope}", "{x.mean_rel_err:.2%}", "{ref: l.nope}", "loss_compare", "gt", "matches", "(a"])))
        if not _paths(rule)[1:]:
            break
    return rule


@bounded(400)
@given(st.one_of(mutated_rule().map(lambda r: dumps({"rules": [r]})), yaml_text))
def test_rule_loader_and_compiler_raise_only_precdx_errors(text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "rule.yaml"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        try:
            compile_rules(load_rule_file(path), known_modes=_MODES)
        except PrecdxError as exc:
            assert exc.path == str(path)
