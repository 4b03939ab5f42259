"""The case defaults (engine/facts/casedefaults.py): every one is a value the collectors emit,
on a field a collected fact always carries, and filling then stripping gives the case back."""
from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path

import pytest

from precdx.errors import PrecdxError, Warnings
from precdx.facts import REGISTRY, parse_fact
from precdx.facts.casedefaults import CASE_DEFAULTS, defaults_of, fill, fillable, same, strip


def _key(value):
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    return json.dumps(value)


def _unseen(seen) -> list[tuple[str, str, object]]:
    return [(t, f, v) for t, fields in CASE_DEFAULTS.items() for f, v in fields.items()
            if _key(v) not in seen.get((t, f), ())]


@pytest.fixture(scope="module")
def emitted(shared_dir) -> dict[tuple[str, str], set[str]]:
    """(fact type, field) -> the values the collectors wrote, over the shared scenarios and the
    msprobe samples, until every case default has been seen (collection only, no diagnosis)."""
    from precdx.api import gather

    seen: dict[tuple[str, str], set[str]] = defaultdict(set)
    folders = [("case", p) for p in sorted((shared_dir / "scenarios").glob("case-*"))]
    folders += [("target", p) for p in sorted((shared_dir / "msprobe-samples").glob("[0-9]*")) if p.is_dir()]
    # the few folders that together show every default go first (the rest only when one is missing)
    first = ("case-17", "case-06", "case-03", "case-19", "13_nan_overflow", "18_monitor_v1", "case-20",
             "17_config_check")
    folders.sort(key=lambda item: first.index(item[1].name) if item[1].name in first else len(first))
    for how, folder in folders:
        if not _unseen(seen):
            break
        try:
            got = gather(folder, warnings=Warnings()) if how == "case" else gather(target=folder, warnings=Warnings())
        except PrecdxError:
            continue
        for fact in got.facts:
            for name, value in fact.model_dump().items():
                seen[(fact.type, name)].add(_key(value))
    return seen


def test_every_case_default_is_a_value_some_collector_emits(emitted):
    assert CASE_DEFAULTS, "no case defaults declared"
    missing = [f"{ftype}.{name} = {value!r}" for ftype, name, value in _unseen(emitted)]
    assert not missing, "case defaults no collector emitted on the shared material: " + ", ".join(missing)


def test_case_defaults_name_fields_every_collected_fact_carries():
    for ftype, fields in CASE_DEFAULTS.items():
        assert ftype in REGISTRY, ftype
        spec = REGISTRY[ftype]
        for name, value in fields.items():
            assert name in fillable(ftype), f"{ftype}.{name} is optional or has a model default"
            kind = spec.fields[name].kind
            ok = {"string": str, "boolean": bool, "integer": int, "number": (int, float)}[kind]
            assert isinstance(value, ok) and (kind == "boolean" or not isinstance(value, bool)), (ftype, name)
            if spec.fields[name].choices:
                assert value in spec.fields[name].choices, (ftype, name)


def test_fill_leaves_given_fields_and_former_names_alone():
    raw = {"type": "nan_compare", "target_nan_count": 3, "baseline_nan_count": 2}
    filled = fill(raw, REGISTRY["nan_compare"].renamed)
    assert filled["target_nan_count"] == 3 and "against_nan_count" not in filled
    assert filled["run"] == "target" and filled["target_skipped_count"] == 0
    fact = parse_fact(filled)
    assert fact.against_nan_count == 2 and fact.against_skipped_count == 0
    assert fill({"type": "observation", "name": "sgd_aligns", "value": True}) == \
        {"type": "observation", "name": "sgd_aligns", "value": True}


def test_strip_then_fill_gives_the_same_fact():
    full = {"type": "first_divergence", "run": "target", "role": "target", "against": "baseline",
            "against_role": "baseline", "step": 0, "rank": 0, "method": "ours", "api": "Functional.gelu.0.forward",
            "api_name": "Functional.gelu", "family": "activation", "direction": "forward", "kind": "introduced",
            "label": "warning", "matched_by": "name", "output_rel_err": 0.2}
    small = strip(full)
    assert small == {"type": "first_divergence", "api": "Functional.gelu.0.forward", "api_name": "Functional.gelu",
                     "family": "activation", "kind": "introduced", "label": "warning", "output_rel_err": 0.2}
    assert parse_fact(fill(small)) == parse_fact(full)
    # a value that differs from the default stays, whatever its spelling
    assert strip({**full, "step": 3})["step"] == 3
    assert "rank" not in strip({**full, "rank": 0.0}) and strip({**full, "method": "msprobe_compare"})["method"]
    assert not same(True, 1) and same(1, 1.0) and same(math.nan, math.nan)
    assert defaults_of("loss_compare")["against"] == "baseline"
