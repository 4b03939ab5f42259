"""Defaults of the rule test cases (rules/**/*.test.yaml): the value a fact of a test case gets
for a field it leaves out, so that a case lists only the fields its rule is about.

Only fields that every collected fact carries (no `None` in their type) and that have no model
default get one here; a field with a model default (e.g. `loss_compare.against`, "baseline")
is filled by the model itself, and an optional field left out stays absent. The values are the
ordinary ones a collector writes for the commonest comparison (the target against the baseline,
msprobe step 0 of rank 0, nothing counted): tests/facts/test_case_defaults.py checks that every
one of them is a value the collectors emit on the shared scenarios and msprobe samples.

`--facts` input and the HTTP API do not use these defaults: there a fact states what it states.
"""
from __future__ import annotations

import math
import types
import typing
from typing import Any

from precdx.facts.base import REGISTRY

_TARGET = {"run": "target", "role": "target"}
_PAIR = {"pair": "target~baseline", "role": "target", "against_role": "baseline"}
_DUMP = {"run": "target", "role": "target", "step": 0, "rank": 0}

CASE_DEFAULTS: dict[str, dict[str, Any]] = {
    # checklist
    "config_diff": dict(_PAIR),
    "config_summary": dict(_PAIR),
    "env_diff": dict(_PAIR),
    "library_diff": dict(_PAIR),
    "eval_gap": dict(_PAIR),
    "config_value": dict(_TARGET),
    "env_switch": dict(_TARGET),
    "library_version": dict(_TARGET),
    "determinism_status": dict(_TARGET),
    "run": {"role": "target"},
    # logs
    "loss_series": dict(_TARGET),
    "loss_compare": {**_TARGET, "band_used": 0.01},
    "rerun_compare": {**_TARGET, "rerun": "target_rerun"},
    "grad_norm_compare": dict(_TARGET),
    "nan_compare": {**_TARGET, "target_nan_count": 0, "against_nan_count": 0, "target_skipped_count": 0,
                    "against_skipped_count": 0, "target_max_nan_50": 0, "against_max_nan_50": 0,
                    "target_max_skipped_50": 0, "against_max_skipped_50": 0,
                    "target_overflow_events": 0, "against_overflow_events": 0},
    "loss_scale_trend": dict(_TARGET),
    "spike_compare": {**_TARGET, "target_spikes": 0, "against_spikes": 0, "target_rate": 0.0,
                      "against_rate": 0.0, "target_recovered": 0, "target_gn_spikes": 0,
                      "against_gn_spikes": 0},
    "group_outlier": {"role": "target", "spikes": 0, "gn_spikes": 0, "nan_count": 0},
    "log_event": {**_TARGET, "count": 1},
    "lr_compare": dict(_TARGET),
    "run_health": dict(_TARGET),
    # msprobe
    "dump_info": {**_DUMP, "task": "statistics", "summary_mode": "statistics", "framework": "pytorch",
                  "nonfinite_count": 0, "complete": True},
    "first_divergence": {"run": "target", "step": 0, "rank": 0, "method": "ours", "direction": "forward"},
    "dump_step_compare": {**_DUMP, "against": "baseline", "against_role": "baseline", "mode": "statistics",
                          "n_unmatched": 0, "n_fallback": 0},
    "first_nan": {**_DUMP, "method": "ours", "direction": "forward"},
    "nondeterministic_api": {"run": "target_rerun", "role": "target_rerun", "against": "target",
                             "against_role": "target", "step": 0, "rank": 0},
    "dump_structure_summary": {"run": "target", "against": "baseline", "step": 0, "rank": 0},
    "compare_result_summary": {"run": "target", "role": "target"},
    "grad_monitor_compare": {"run": "target", "against": "baseline"},
    "monitor_anomaly": {"run": "target", "role": "target", "rank": 0},
    "config_check_result": {"run": "target"},
}


def _optional(annotation: Any) -> bool:
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _optional(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return type(None) in typing.get_args(annotation)
    return False


def fillable(ftype: str) -> set[str]:
    """The fields of a fact type a case default may fill: no `None` in their type, no model default."""
    spec = REGISTRY[ftype]
    return {name for name, info in spec.model.model_fields.items()
            if name not in ("type", "source") and not _optional(info.annotation) and info.default is None}


def defaults_of(ftype: str) -> dict[str, Any]:
    """Everything a case may leave out of a fact of this type, with the value it then gets: the
    model's own (non-None) defaults and the case defaults."""
    spec = REGISTRY.get(ftype)
    if spec is None:
        return {}
    out = {name: info.default for name, info in spec.model.model_fields.items()
           if name not in ("type", "source") and info.default is not None}
    out.update(CASE_DEFAULTS.get(ftype, {}))
    return out


def fill(data: dict[str, Any], aliases: dict[str, str] | None = None) -> dict[str, Any]:
    """A test case's fact with the case defaults of the fields it leaves out (a field given
    under an old name, see `aliases`, counts as given); a field given as null stays absent."""
    ftype = data.get("type")
    extra = CASE_DEFAULTS.get(ftype) if isinstance(ftype, str) else None
    given = set(data)
    for old, new in (aliases or {}).items():
        if old in given:
            given.add(new)
    filled = {**{k: v for k, v in (extra or {}).items() if k not in given}, **data}
    return {k: v for k, v in filled.items() if v is not None}


def same(a: Any, b: Any) -> bool:
    """Equal as a fact value (1 == 1.0; True is not 1; NaN equals NaN)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) in (int, float) and type(b) in (int, float) and a == b or \
        (type(a) is type(b) and a == b)


def strip(data: dict[str, Any]) -> dict[str, Any]:
    """The inverse of `fill` for writing a minimal case: fields equal to what the case would get
    anyway are left out (`type` and `source` always stay), and a field with a case default that
    the fact leaves out is written `null` so that it stays absent."""
    ftype = data.get("type", "")
    defaults = defaults_of(ftype)
    out = {k: v for k, v in data.items()
           if k in ("type", "source") or k not in defaults or not same(v, defaults[k])}
    out.update({k: None for k in CASE_DEFAULTS.get(ftype, {}) if k not in data})
    return out
