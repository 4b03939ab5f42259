"""Fact vocabulary: parsing, NaN/Inf representation, contradictions, fact files."""
import json
import math

import pytest

from precdx.errors import PrecdxError
from precdx.facts import REGISTRY, FactSet, load_fact_files, match_dict, parse_fact


def test_unknown_fact_type_suggests_a_near_name():
    with pytest.raises(PrecdxError) as exc:
        parse_fact({"type": "observaton", "name": "stress_test_failed"})
    assert "unknown fact type 'observaton'" in exc.value.message
    assert "observation" in (exc.value.hint or "")


def test_wrong_field_type_is_named():
    with pytest.raises(PrecdxError) as exc:
        parse_fact({"type": "run", "role": "target", "steps": "many"})
    assert "run.steps" in exc.value.message


def test_unknown_field_rejected():
    with pytest.raises(PrecdxError) as exc:
        parse_fact({"type": "run", "role": "target", "colour": "blue"})
    assert "colour" in exc.value.message


@pytest.mark.parametrize("raw, check", [
    ("nan", math.isnan), ("NaN", math.isnan), ("inf", lambda v: v == math.inf),
    ("-inf", lambda v: v == -math.inf), (float("nan"), math.isnan), (1e-05, lambda v: v == 1e-05),
    ("1e-05", lambda v: v == 1e-05),
])
def test_nonfinite_numbers_are_explicit(raw, check):
    fact = parse_fact({"type": "observation", "name": "lr_zero_aligns", "number": raw})
    assert check(fact.number)
    out = fact.to_json()
    if isinstance(fact.number, float) and not math.isfinite(fact.number):
        assert out["number"] in ("nan", "inf", "-inf")
        d = match_dict(fact)
        assert "number" not in d and d["number__nonfinite"] == out["number"]
    json.dumps(out, allow_nan=False)  # never emits bare NaN


def test_identical_facts_collapse_and_contradictions_raise():
    a = parse_fact({"type": "observation", "name": "stress_test_failed", "value": True, "source": "a.yaml"})
    b = parse_fact({"type": "observation", "name": "stress_test_failed", "value": True, "source": "b.yaml"})
    c = parse_fact({"type": "observation", "name": "stress_test_failed", "value": False, "source": "c.yaml"})
    fs = FactSet([a, b])
    assert len(fs) == 1
    with pytest.raises(PrecdxError) as exc:
        fs.add(c)
    assert "contradictory" in exc.value.message and "c.yaml" in exc.value.render()
    assert fs.add(c, strict=False) is False and len(fs) == 1


def test_fact_files_yaml_and_json(tmp_path):
    y = tmp_path / "f.yaml"
    y.write_text("facts:\n  - {type: observation, name: stress_test_failed, value: yes}\n")
    j = tmp_path / "g.json"
    j.write_text(json.dumps([{"type": "run", "role": "target", "steps": 3}]))
    fs = load_fact_files([y, j])
    assert {f.type for f in fs} == {"observation", "run"}
    assert all(f.source for f in fs)


@pytest.mark.parametrize("content, msg", [
    (b"facts:\n  - {type: run, role: target}\n  - {type: run, role: target, role: baseline}\n", "duplicate key"),
    (b"\x00\x01\x02binary", "not UTF-8"),
    (b'[{"type": "run", "role": "tar', "invalid YAML"),
    (b"facts: {type: run}\n", "must be a list"),
    (b"- !!python/object/apply:os.system ['echo hi']\n", "not allowed"),
    (b"a: &a [1,2]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
     b"d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: [*d,*d,*d,*d,*d,*d,*d,*d,*d]\n"
     b"f: [*d,*d,*d,*d,*d,*d,*d,*d,*d]\ng: [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]\n",
     "alias"),
])
def test_bad_fact_files_name_the_file(tmp_path, content, msg):
    p = tmp_path / "bad.yaml"
    p.write_bytes(content)
    with pytest.raises(PrecdxError) as exc:
        load_fact_files([p])
    assert msg in exc.value.message
    assert str(p) in exc.value.render()


def test_missing_fact_file():
    with pytest.raises(PrecdxError) as exc:
        load_fact_files(["/nonexistent/facts.yaml"])
    assert "not found" in exc.value.message


def test_every_fact_type_documents_its_fields():
    for name, spec in REGISTRY.items():
        assert spec.collectors, name
        for f in spec.fields.values():
            assert f.description, f"{name}.{f.name} has no description"
