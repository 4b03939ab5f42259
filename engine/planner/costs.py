"""What evidence costs: the rule schema's cost classes as weights, the cost of answering each
catalogue question, and the cost of producing each collector's facts."""
from __future__ import annotations

from precdx.vocabulary import COST_CLASSES

# Each class costs about twice the one before: read a config < rerun one step < dump one step
# < a long run < cluster time. Information gain is divided by this weight.
COST_WEIGHT: dict[str, float] = {cls: float(2 ** i) for i, cls in enumerate(COST_CLASSES)}

# What it takes a person to answer a catalogue question (engine/facts/core.py OBSERVATIONS).
OBSERVATION_COST: dict[str, str] = {
    "vanishes_with_launch_blocking": "rerun",
    "vanishes_with_dump": "rerun",
    "reproduces_on_rerun": "rerun",
    "reproduces_with_determinism": "rerun",
    "stress_test_failed": "cluster",
    "tied_to_specific_nodes": "cluster",
    "fp32_upcast_fixes": "rerun",
    "small_ops_fix": "rerun",
    "sgd_aligns": "rerun",
    "lr_zero_aligns": "long_run",
    "kshift_off_fixes": "rerun",
    "overlap_off_fixes": "rerun",
    "same_checkpoint": "read",
    "same_data_order": "dump",
    "downstream_metric_gap": "read",
    "generation_never_stops": "read",
    "wrong_first_token": "read",
    "loss_plateau_suspicious": "read",
    "model_is_moe": "read",
    "instruction_tuning": "read",
    "trains_in_fp16": "read",
    "sequence_parallel_on": "read",
    "several_cards": "read",
    "target_loss_nan": "read",
    "first_step_loss_off": "read",
    "loss_drifts_later": "read",
    "target_loss_spikes": "read",
}
DEFAULT_OBSERVATION_COST = "rerun"

# What producing a missing fact takes, by the collector that emits its type.
COLLECTOR_COST: dict[str, str] = {
    "discovery": "read",
    "checklist": "read",
    "logs": "read",
    "msprobe": "dump",
    "probe": "dump",
    "user": "rerun",
}


# Fact types that need a new run before any collector can emit them, whatever reads the files.
FACT_COST: dict[str, str] = {
    "rerun_compare": "rerun",           # the job launched again
    "nondeterministic_api": "dump",     # dumps of a run and its rerun
    "group_outlier": "cluster",         # the same job on other node groups
    "group_summary": "cluster",
    "grad_monitor_compare": "long_run",  # msprobe monitor over many steps
    "monitor_anomaly": "long_run",
    "free_benchmark_hit": "rerun",
    "api_precheck": "rerun",
    "eval_gap": "long_run",             # a trained model evaluated downstream
}


def observation_cost(name: str) -> str:
    return OBSERVATION_COST.get(name, DEFAULT_OBSERVATION_COST)


def fact_cost(collectors: tuple[str, ...], fact_type: str | None = None) -> str:
    """What getting a fact type costs: its own entry in FACT_COST, else the cheapest of the
    collectors that emit it."""
    if fact_type in FACT_COST:
        return FACT_COST[fact_type]
    classes = [COLLECTOR_COST.get(c, "rerun") for c in collectors] or ["rerun"]
    return min(classes, key=COST_CLASSES.index)
