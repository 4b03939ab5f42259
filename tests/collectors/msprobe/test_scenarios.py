"""Scenario dumps and monitor CSVs give the expected localisation. Nothing here is special-cased
in the code: every case goes through the same generic collector."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from .conftest import collect_case, of_type, run_dir


def _case(scenarios: Path, name: str) -> list:
    root = scenarios / name
    spec = yaml.safe_load((root / "expected.yaml").read_text())
    runs = [run_dir(role, root / sub, name=sub) for role, sub in spec["runs"].items()]
    facts, _ = collect_case(runs)
    return facts


def _cases_with_api(scenarios: Path) -> list[tuple[str, str]]:
    out = []
    for exp in sorted(scenarios.glob("case-*/expected.yaml")):
        spec = yaml.safe_load(exp.read_text())
        if spec.get("api") and any((exp.parent / sub / "msprobe_dump").is_dir() for sub in spec["runs"].values()):
            out.append((exp.parent.name, spec["api"]))
    return out


def test_every_case_with_an_api_names_it(scenarios: Path) -> None:
    cases = _cases_with_api(scenarios)
    assert len(cases) >= 3
    for name, api in cases:
        facts = _case(scenarios, name)
        named = {f.api_name for f in facts if f.type in ("first_divergence", "first_nan", "nondeterministic_api")}
        assert api in named, (name, api, named)


def test_case01_gelu_introduced(scenarios: Path) -> None:
    f, = of_type(_case(scenarios, "case-01"), "first_divergence", method="ours")
    assert (f.api, f.api_name, f.family, f.kind, f.direction) == (
        "Functional.gelu.0.forward", "Functional.gelu", "activation", "introduced", "forward")
    assert f.module == "decoder.layers.0.mlp" and "gelu" in f.code_line
    assert f.output_rel_err > 0.1 > f.input_rel_err


def test_case17_softmax_nan_origin(scenarios: Path) -> None:
    facts = _case(scenarios, "case-17")
    nan, = of_type(facts, "first_nan", role="target")
    assert (nan.api_name, nan.kind, nan.baseline_finite, nan.is_origin_rank) == (
        "Functional.softmax", "operator_output", True, True)
    assert not of_type(facts, "first_nan", role="baseline")  # legal -inf masks are not NaN


def test_case12_nan_already_in_a_weight(scenarios: Path) -> None:
    nan, = of_type(_case(scenarios, "case-12"), "first_nan", role="target")
    assert (nan.api_name, nan.kind) == ("Functional.linear", "weight")


def test_case06_matmul_nondeterministic(scenarios: Path) -> None:
    facts = _case(scenarios, "case-06")
    f, = of_type(facts, "nondeterministic_api")
    assert (f.api, f.kind, f.mode, f.run, f.against) == (
        "Torch.matmul.0.forward", "nondeterministic_op", "md5", "target_rerun", "target")


@pytest.mark.parametrize("case, api_name, kind", [
    ("case-05", "Functional.embedding", "weights"),
    ("case-10", "Functional.embedding", "data_input"),
    ("case-08", "Tensor.__add__", "wiring"),
])
def test_first_divergence_kinds(scenarios: Path, case: str, api_name: str, kind: str) -> None:
    f, = of_type(_case(scenarios, case), "first_divergence", method="ours")
    assert (f.api_name, f.kind) == (api_name, kind)


def test_case07_step0_matches_step1_does_not(scenarios: Path) -> None:
    facts = _case(scenarios, "case-07")
    steps = {f.step: f.all_match for f in of_type(facts, "dump_step_compare")}
    assert steps == {0: True, 1: False}
    f, = of_type(facts, "first_divergence", method="ours")
    assert f.step == 1 and f.kind == "weights"


def test_case04_lr_mismatch_dump_matches(scenarios: Path) -> None:
    facts = _case(scenarios, "case-04")
    assert [f.all_match for f in of_type(facts, "dump_step_compare")] == [True]
    assert not of_type(facts, "first_divergence")


def test_case02_embedding_gradient_departs_and_grows(scenarios: Path) -> None:
    f, = of_type(_case(scenarios, "case-02"), "grad_monitor_compare")
    assert f.departs and f.param == "embedding.word_embeddings.weight" and f.param_family == "embedding"
    assert f.late_growth and not f.common_mode and 60 <= f.first_step <= 80


def test_case03_gradients_aligned(scenarios: Path) -> None:
    f, = of_type(_case(scenarios, "case-03"), "grad_monitor_compare")
    assert not f.departs and f.first_step is None and f.n_steps == 150
