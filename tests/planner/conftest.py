"""Planner fixtures: a small consultation rule pack and three documented cases (the full set of
facts a person could eventually report, and the failure mode they point to)."""
from __future__ import annotations

from pathlib import Path

import pytest

from precdx.facts import parse_fact

PACK = Path(__file__).with_name("consult_pack.yaml")

RUNS = [{"type": "run", "role": "baseline", "name": "baseline", "device": "gpu"},
        {"type": "run", "role": "target", "name": "target", "device": "npu"}]


def obs(name: str, value: bool) -> dict:
    return {"type": "observation", "name": name, "value": value}


# case -> (all facts a person could report, expected top failure mode)
CASES = {
    "kshift": ([*RUNS, obs("same_checkpoint", True), obs("same_data_order", True), obs("reproduces_on_rerun", True),
                obs("vanishes_with_dump", False), obs("vanishes_with_launch_blocking", False),
                obs("overlap_off_fixes", False), obs("kshift_off_fixes", True), obs("stress_test_failed", False)],
               "operator.matmul_kshift"),
    "faulty_node": ([*RUNS, obs("same_checkpoint", True), obs("same_data_order", True),
                     obs("reproduces_on_rerun", True), obs("kshift_off_fixes", False), obs("overlap_off_fixes", False), obs("vanishes_with_dump", False),
                     obs("vanishes_with_launch_blocking", False), obs("fp32_upcast_fixes", False),
                     obs("sgd_aligns", False), obs("stress_test_failed", True), obs("tied_to_specific_nodes", True)],
                    "hardware.faulty_node"),
    "nondeterministic_op": ([*RUNS, obs("same_checkpoint", True), obs("same_data_order", True),
                             obs("reproduces_on_rerun", False), obs("reproduces_with_determinism", False),
                             obs("kshift_off_fixes", False), obs("overlap_off_fixes", False),
                             obs("vanishes_with_dump", False), obs("vanishes_with_launch_blocking", False),
                             obs("stress_test_failed", False)],
                            "determinism.nondeterministic_operator"),
}


@pytest.fixture
def pack() -> str:
    return str(PACK)


def facts_of(items: list[dict]):
    return [parse_fact(d) for d in items]
