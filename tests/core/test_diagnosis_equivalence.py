"""The optimised diagnosis path gives exactly the Diagnosis of the plain one: the near-miss
search (`near_misses`, existence checks with shared alpha tests and hashed equality joins)
against its reference form (`near_misses_reference`, every relaxation enumerated with
`match_alternative`), compared as full Diagnosis JSON on every shared scenario and on synthetic
requests from bench/synthfacts.py (500 facts in the fast lane; the scenarios and 5,000 facts
in the slow lane)."""
from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path

import pytest

import precdx.diagnosis as diagnosis_mod
from precdx.diagnosis import diagnose, load_pack
from precdx.errors import Warnings
from precdx.facts import FactSet
from precdx.matching.python_engine import near_misses, near_misses_reference

_SPEC = importlib.util.spec_from_file_location(
    "synthfacts", Path(__file__).resolve().parents[2] / "bench" / "synthfacts.py")
synthfacts = importlib.util.module_from_spec(_SPEC)
sys.modules.setdefault("synthfacts", synthfacts)
_SPEC.loader.exec_module(synthfacts)


def _both(monkeypatch, facts: FactSet, **kw) -> tuple[str, str]:
    """(fast, reference) Diagnosis JSON of the same request."""
    fast = diagnose(facts, warnings=Warnings(), **kw).model_dump_json()
    with monkeypatch.context() as m:
        m.setattr(diagnosis_mod, "near_misses", near_misses_reference)
        ref = diagnose(facts, warnings=Warnings(), **kw).model_dump_json()
    return fast, ref


@pytest.mark.slow
def test_scenarios_diagnose_identically(shared_dir, monkeypatch):
    from precdx.pipeline import collect, discover

    cases = sorted(p for p in (shared_dir / "scenarios").iterdir() if (p / "expected.yaml").is_file())
    assert cases
    with_misses = 0
    for case in cases:
        w = Warnings()
        facts = collect(discover(case, warnings=w), w)
        for lang in ("en", "zh"):
            fast, ref = _both(monkeypatch, facts, lang=lang)
            assert fast == ref, f"{case.name} ({lang})"
        with_misses += '"near_misses":[]' not in fast
    assert with_misses >= len(cases) // 2  # the comparison covers real near misses


def _synthetic(n: int, seed: int) -> FactSet:
    return FactSet(synthfacts.synthesise(load_pack(), n, random.Random(seed)))


def test_synthetic_request_diagnoses_identically(monkeypatch):
    facts = _synthetic(500, 11)
    for engine in ("durable", "python"):
        fast, ref = _both(monkeypatch, facts, engine=engine)
        assert fast == ref, engine
    assert '"near_misses":[]' not in fast


@pytest.mark.slow
def test_5000_fact_request_diagnoses_identically(monkeypatch):
    facts = _synthetic(5000, 7)
    fast, ref = _both(monkeypatch, facts)
    assert fast == ref
    pack = load_pack()
    fl = list(facts)
    fired = {f.rule_id for f in diagnosis_mod.get_matcher("durable")[1].run(fl)}
    assert near_misses(pack, fl, fired) == near_misses_reference(pack, fl, fired)
