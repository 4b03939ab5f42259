"""Former fact field names (the reference side was `ref_role` and `baseline_*` before it was
`against_role` / `against_*` everywhere) stay accepted for one schema version in `--facts`
files and in HTTP input, and mean exactly what the current names mean."""
from __future__ import annotations

import json
import warnings

import pytest

from precdx.errors import PrecdxError
from precdx.facts import REGISTRY, load_fact_files, parse_fact

OLD = [
    {"type": "config_diff", "pair": "target~baseline", "role": "target", "ref_role": "baseline", "name": "lr",
     "category": "hyperparameter", "baseline": "0.0003", "target": "0.0006", "presence": "both",
     "rel_change": 1.0, "relevant": True},
    {"type": "nan_compare", "run": "target", "role": "target", "target_nan_count": 6, "baseline_nan_count": 0,
     "target_skipped_count": 0, "baseline_skipped_count": 0, "target_first_nan_step": 40,
     "target_max_nan_50": 6, "baseline_max_nan_50": 0, "target_max_skipped_50": 0,
     "baseline_max_skipped_50": 0, "target_overflow_events": 0, "baseline_overflow_events": 0},
]


def _new(fact: dict) -> dict:
    renamed = REGISTRY[fact["type"]].renamed
    return {renamed.get(k, k): v for k, v in fact.items()}


NEW = [_new(f) for f in OLD]


def test_every_former_name_maps_to_a_current_field_of_the_reference_side():
    pairs = {(t, old, new) for t, spec in REGISTRY.items() for old, new in spec.renamed.items()}
    assert ("config_diff", "ref_role", "against_role") in pairs
    assert ("nan_compare", "baseline_nan_count", "against_nan_count") in pairs
    for ftype, old, new in pairs:
        assert new in REGISTRY[ftype].fields
        if old == "ref_role" or old.startswith("baseline_"):
            assert new == "against" + old.removeprefix("ref").removeprefix("baseline"), (ftype, old, new)
    # no fact type keeps a reference-side field under the old spelling
    for ftype, spec in REGISTRY.items():
        assert "ref_role" not in spec.fields, ftype
        for name in spec.fields:
            if name.startswith("baseline_") and "against" in spec.fields:
                raise AssertionError(f"{ftype}.{name}: the reference side is against_*")


def test_facts_files_accept_both_names(tmp_path):
    old, new = tmp_path / "old.json", tmp_path / "new.yaml"
    old.write_text(json.dumps(OLD))
    new.write_text(json.dumps({"facts": NEW}))
    a = [f.model_dump(exclude={"source"}) for f in load_fact_files([old])]
    b = [f.model_dump(exclude={"source"}) for f in load_fact_files([new])]
    assert a == b
    assert a[0]["against_role"] == "baseline" and a[1]["against_nan_count"] == 0 and "ref_role" not in a[0]
    fact = parse_fact(OLD[1])
    assert fact.baseline_max_nan_50 == fact.against_max_nan_50 == 0  # code reading the old name still works
    assert fact.to_json()["against_max_nan_50"] == 0 and "baseline_max_nan_50" not in fact.to_json()


def test_giving_both_names_of_one_field_is_an_error():
    with pytest.raises(PrecdxError, match="former name of 'against_role'"):
        parse_fact({**NEW[0], "ref_role": "baseline"})


def test_cli_diagnoses_old_and_new_names_alike(tmp_path):
    from click.testing import CliRunner

    from precdx.cli import main

    outs = []
    for name, facts in (("old", OLD), ("new", NEW)):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(facts))
        out = tmp_path / f"{name}.out.json"
        res = CliRunner().invoke(main, ["diagnose", "--facts", str(path), "--format", "json", "-o", str(out)])
        assert res.exit_code == 0, res.output
        outs.append(json.loads(out.read_text().replace(str(path), "<facts>")))
    assert outs[0]["hypotheses"] and outs[0]["hypotheses"] == outs[1]["hypotheses"]
    assert [h["failure_mode"] for h in outs[0]["hypotheses"]][0] == "config.hyperparameter_mismatch"


def test_http_input_accepts_old_and_new_names_alike(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from fastapi.testclient import TestClient
    from precdx.service.app import create_app
    from precdx.service.settings import Settings

    settings = Settings(db_url=f"sqlite:///{tmp_path / 's.sqlite3'}", request_timeout=60.0)
    with TestClient(create_app(settings)) as client:
        old = client.post("/v1/diagnose", json={"facts": OLD})
        new = client.post("/v1/diagnose", json={"facts": NEW})
        both = client.post("/v1/diagnose", json={"facts": [{**NEW[0], "ref_role": "baseline"}]})
    assert old.status_code == new.status_code == 200
    assert old.json()["hypotheses"] == new.json()["hypotheses"] and old.json()["hypotheses"]
    echoed = [f for f in old.json()["facts"] if f["type"] == "config_diff"][0]
    assert echoed["against_role"] == "baseline" and "ref_role" not in echoed
    assert both.status_code == 400 or both.status_code == 422


def test_the_vocabulary_lists_former_names():
    from precdx.facts.describe import vocabulary_json, vocabulary_text

    vocab = vocabulary_json()
    assert vocab["config_diff"]["fields"]["against_role"]["former_names"] == ["ref_role"]
    assert "former_names" not in vocab["config_diff"]["fields"]["pair"]
    assert "against_nan_count: integer [count] (was: baseline_nan_count)" in vocabulary_text()
