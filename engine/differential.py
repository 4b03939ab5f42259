"""The symptom differential: from the symptoms a case shows to a ranked list of failure modes,
using how each mode presents (the `presentation` block of its kb entry).

Rules name causes from specific evidence. When the evidence is partial (two logs, one run, a
reported behaviour) few or no rules fire, yet the symptoms alone already narrow the field: a
NaN only on the target, a first-step gap of 13% that stays constant, reruns that differ from
each other. This module turns the established symptoms and the shape of the loss error into a
*profile*, scores every mode's presentation against it, and hands the ranking a bounded weight
per mode (never above DIFFERENTIAL_CAP, so specific rule evidence keeps the upper hand).

It also encodes the procedure's order (guide §2.4, §2.5): once a NaN/overflow is established on
the target only, explanations that never present one are argued against ("NaN first").

Frequencies in the kb are expert estimates (shared/domain-audit.md §5), not measured data; they
act as priors only.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Iterable

DIFFERENTIAL_CAP = 0.35        # the best-fitting mode's weight (below a typical specific rule)
MIN_WEIGHT = 0.08              # modes weaker than this (after normalising) are not listed
MAX_MODES = 6
NAN_FIRST_AGAINST = 0.35       # "NaN first": against modes that never present a NaN
PRIOR = {"very_common": 1.0, "common": 0.75, "occasional": 0.5, "rare": 0.3}
LIKELIHOOD = {"typical": 1.0, "possible": 0.45}
ABSENT = 0.12                  # an established symptom the mode does not present
TENTATIVE_MAX_STEPS = 5        # below this many compared steps a loss gap is only tentative
TENTATIVE_CAP = 0.2            # the tentative differential's best weight
SHAPE_MIN_STEPS = 3            # fewer compared steps than this have no error shape
GRAD_NORM_MIN_STEPS = 3        # the grad-norm symptom rules need this many compared steps (SYM-011)
GRAD_NORM_TOLERANCE = 0.1      # the documented grad-norm acceptance (within 10%)
SECONDARY_ABSENT = 0.7         # ... when that symptom is a consequence of another one (see SECONDARY)
CHECKLIST_CLEAN_AGAINST = 0.3  # configs were read and no rule of a checklist-only mode fired
CHECKLIST_COVERED_AGAINST = 0.55  # ... and they name on both sides most settings the mode is about
# symptoms that follow from another established one: a loss gap moves the grad norm and the
# downstream metrics too, so a mode is not penalised for not listing them
SECONDARY = {"grad_norm_difference": {"first_step_difference", "long_run_difference"},
             "downstream_gap": {"first_step_difference", "long_run_difference", "nan_overflow"},
             "long_run_difference": {"first_step_difference", "nan_overflow"},
             "spikes": {"nan_overflow"}}

# symptom classes that say the runs differ (drive the verdict); overflow_hidden also does
MISALIGNING = ("first_step_difference", "long_run_difference", "nan_overflow", "spikes",
               "downstream_gap", "irreproducible", "grad_norm_difference", "overflow_hidden")
# the classes a training curve shows (the others: reruns, a downstream evaluation)
CURVE_SYMPTOMS = frozenset({"nan_overflow", "first_step_difference", "long_run_difference", "spikes",
                            "grad_norm_difference"})
SYMPTOM_LABEL = {
    "first_step_difference": ("S1 first-step gap", "S1 首步差异"),
    "long_run_difference": ("S2 long-run gap", "S2 长稳差异"),
    "nan_overflow": ("S3 NaN/overflow", "S3 NaN/溢出"),
    "spikes": ("S4 spikes", "S4 尖刺"),
    "downstream_gap": ("S5 downstream gap", "S5 下游指标差异"),
    "irreproducible": ("S6 not reproducible", "S6 不可复现"),
    "grad_norm_difference": ("grad-norm gap", "grad norm 差异"),
    "overflow_hidden": ("fewer overflows than the baseline", "溢出少于标杆"),
}


@dataclass
class Profile:
    """What the case shows, independent of any cause."""

    symptoms: set[str] = field(default_factory=set)
    runs: str | None = None            # target_only | both | rerun_differs
    onset: str | None = None           # step1 | early | late
    step1_magnitude: str | None = None  # none | noise | small | large
    error_shape: str | None = None     # one_sided | zero_mean | constant_ratio | growing
    steps_compared: int | None = None
    rerun_difference: str | None = None   # tiny | large: how far the target's own rerun departs
    tentative: set[str] = field(default_factory=set)  # gaps seen on too few points to establish a symptom
    notes: list[str] = field(default_factory=list)
    scopes: dict[str, "ScopeReading"] = field(default_factory=dict)  # what kind of job it is (read_scopes)
    own: set[str] = field(default_factory=set)  # seen in the target's own curve, with nothing to compare it with

    def secondary(self, symptom: str) -> bool:
        return bool(SECONDARY.get(symptom, set()) & (self.symptoms | self.own))

    def describe(self, lang: str = "en") -> str:
        idx = 1 if lang == "zh" else 0
        parts = [SYMPTOM_LABEL.get(s, (s, s))[idx] for s in sorted(self.symptoms)]
        extra = []
        for name, val in (("runs", self.runs), ("onset", self.onset), ("step-1 gap", self.step1_magnitude),
                          ("error shape", self.error_shape)):
            if val:
                extra.append(f"{name} {val.replace('_', ' ')}")
        text = ", ".join(parts) if parts else ("无已确立症状" if lang == "zh" else "no established symptom")
        if self.own and not parts:
            seen = ", ".join(SYMPTOM_LABEL.get(s, (s, s))[idx] for s in sorted(self.own))
            text = (f"仅见于目标侧自身曲线（没有可比较的参照）：{seen}" if lang == "zh"
                    else f"in the target's own curve (nothing to compare it with): {seen}")
        if self.tentative and not parts:
            seen = ", ".join(SYMPTOM_LABEL.get(s, (s, s))[idx] for s in sorted(self.tentative))
            text = (f"仅为初步迹象（比较的 step 太少，不足以确立症状）：{seen}" if lang == "zh"
                    else f"tentative only (too few compared steps to establish a symptom): {seen}")
        return text + (f" ({'; '.join(extra)})" if extra else "")


def _num(v: Any) -> float | None:
    if v is None or isinstance(v, bool):
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _first(facts: Iterable[Any], ftype: str, **where) -> Any | None:
    for f in facts:
        if getattr(f, "type", None) != ftype:
            continue
        if all(getattr(f, k, None) == v for k, v in where.items()):
            return f
    return None


# what a person reported (declared observations) that is itself a symptom: name -> (symptom, when)
OBSERVED_SYMPTOMS = {
    "downstream_metric_gap": ("downstream_gap", True),
    "reproduces_on_rerun": ("irreproducible", False),
    "generation_never_stops": ("downstream_gap", True),
    "wrong_first_token": ("downstream_gap", True),
    "target_loss_nan": ("nan_overflow", True),
    "first_step_loss_off": ("first_step_difference", True),
    "loss_drifts_later": ("long_run_difference", True),
    "target_loss_spikes": ("spikes", True),
}
# The questions that say which symptom class a case is in: asked when nothing collected shows one
# (a consultation that starts from what a person reports). Where each puts the onset.
SYMPTOM_QUESTIONS = ("target_loss_nan", "first_step_loss_off", "loss_drifts_later", "target_loss_spikes")
_OBSERVED_ONSET = {"first_step_loss_off": "step1", "loss_drifts_later": "late"}


def observed_symptom(f: Any) -> str | None:
    """The symptom an answered observation reports (OBSERVED_SYMPTOMS), else None."""
    if getattr(f, "type", None) != "observation":
        return None
    hit = OBSERVED_SYMPTOMS.get(getattr(f, "name", ""))
    return hit[0] if hit is not None and getattr(f, "value", None) is hit[1] else None


def symptom_unknown(facts: list[Any]) -> bool:
    """Nothing collected shows the symptom: no run brought an artefact, nothing was compared, and
    no answer so far names a symptom (the case is only what a person says)."""
    return all(getattr(f, "type", None) in ("observation", "declared_change") and observed_symptom(f) is None
               for f in facts)


def build_profile(facts: list[Any], symptoms: Iterable[str]) -> Profile:
    prof = Profile(symptoms=set(symptoms), scopes=read_scopes(facts))
    for f in facts:
        symptom = observed_symptom(f)
        if symptom is not None:
            prof.symptoms.add(symptom)
            prof.onset = prof.onset or _OBSERVED_ONSET.get(getattr(f, "name", ""))
    lc = _first(facts, "loss_compare", role="target")
    nc = _first(facts, "nan_compare", role="target")
    sc = _first(facts, "spike_compare", role="target")
    rr = _first(facts, "rerun_compare", role="target")
    if lc is not None:
        prof.steps_compared = getattr(lc, "steps_compared", None)
        first = _num(getattr(lc, "first_step_rel_err", None))
        if first is not None:
            prof.step1_magnitude = ("none" if first < 0.001 else "noise" if first < 0.005
                                    else "small" if first < 0.05 else "large")
        mean = _num(getattr(lc, "mean_rel_err", None))
        signed = _num(getattr(lc, "mean_signed_rel_err", None))
        early = _num(getattr(lc, "mean_rel_err_early", None))
        late = _num(getattr(lc, "mean_rel_err_late", None))
        ratio_mean = _num(getattr(lc, "ratio_mean", None))
        ratio_cv = _num(getattr(lc, "ratio_cv", None))
        # the shape of an error is a property of a curve: a point or two has none
        if mean is not None and mean > 0.002 and (prof.steps_compared or 0) >= SHAPE_MIN_STEPS:
            if (ratio_cv is not None and ratio_mean is not None and abs(ratio_mean - 1) > 0.03
                    and ratio_cv < 0.25 * abs(ratio_mean - 1)):
                prof.error_shape = "constant_ratio"
            elif early is not None and late is not None and late > 2 * max(early, 1e-9) and late > 0.01:
                prof.error_shape = "growing"
            elif signed is not None and abs(signed) >= 0.7 * mean:
                prof.error_shape = "one_sided"
            elif signed is not None and abs(signed) <= 0.3 * mean:
                prof.error_shape = "zero_mean"
        over = getattr(lc, "first_departed_step", None)
        start = getattr(lc, "first_step", None) or 1
        n = prof.steps_compared or 0
        if first is not None and first >= 0.005:
            prof.onset = "step1"
        elif over is not None and n:
            prof.onset = "early" if (over - start) <= max(10, n // 5) else "late"
    # a gap beyond the tolerances on fewer points than a symptom rule needs: not a symptom (no
    # verdict rests on it), but enough to rank a tentative differential
    if lc is not None and (prof.steps_compared or 0) < TENTATIVE_MAX_STEPS:
        first = _num(getattr(lc, "first_step_rel_err", None))
        first_abs = _num(getattr(lc, "first_step_abs_err", None))
        mean = _num(getattr(lc, "mean_rel_err", None))
        if first is not None and first >= 0.005 and (first_abs is None or first_abs >= 0.005) \
                and "first_step_difference" not in prof.symptoms:
            prof.tentative.add("first_step_difference")
        elif mean is not None and mean > 0.01 and "long_run_difference" not in prof.symptoms:
            prof.tentative.add("long_run_difference")
        if prof.tentative and prof.onset is None:
            prof.onset = "step1" if "first_step_difference" in prof.tentative else "early"
    # a grad-norm gap beyond the 10% acceptance on fewer points than the symptom rules need
    gc = _first(facts, "grad_norm_compare", role="target")
    if gc is not None and "grad_norm_difference" not in prof.symptoms \
            and (getattr(gc, "steps_compared", 0) or 0) < GRAD_NORM_MIN_STEPS:
        gap = max((v for v in (_num(getattr(gc, "first_step_rel_err", None)), _num(getattr(gc, "mean_rel_err", None)))
                   if v is not None), default=None)
        if gap is not None and gap > GRAD_NORM_TOLERANCE:
            prof.tentative.add("grad_norm_difference")
            if prof.runs is None:
                prof.runs = "target_only"
            gfirst = _num(getattr(gc, "first_step_rel_err", None))
            if prof.onset is None and gfirst is not None and gfirst > GRAD_NORM_TOLERANCE:
                prof.onset = "step1"
    # one run alone: a NaN in its own curve is a symptom of that run, though not a gap to anything
    if not any(getattr(f, "type", None) in COMPARED for f in facts):
        rh = _first(facts, "run_health", role="target")
        first_nan = getattr(rh, "first_nan_step", None) if rh is not None else None
        if first_nan is not None:
            prof.own.add("nan_overflow")
            start = getattr(rh, "first_step", None) or 1
            n = (getattr(rh, "loss_points", 0) or 0) + (getattr(rh, "grad_norm_nonfinite", 0) or 0)
            prof.onset = "early" if first_nan - start <= max(10, n // 5) else "late"
    # where did a NaN show: on the target only, or on both sides
    if "nan_overflow" in prof.symptoms:
        prof.runs = "target_only"
        if nc is not None and (getattr(nc, "against_nan_count", 0) or 0) > 0:
            prof.runs = "both"
        first_nan = None
        if nc is not None:
            first_nan = getattr(nc, "target_first_nan_step", None)
        if first_nan is None:
            ev = _first(facts, "log_event", role="target", kind="nan_in_grad")
            first_nan = getattr(ev, "step", None) if ev is not None else None
        if first_nan is not None and prof.onset is None:
            n = prof.steps_compared or 0
            prof.onset = "early" if first_nan <= max(10, n // 5) else "late"
    if "spikes" in prof.symptoms and sc is not None and (getattr(sc, "against_spikes", 0) or 0) > 0:
        prof.runs = prof.runs or "both"
    if "irreproducible" in prof.symptoms:
        prof.runs = "rerun_differs"
        if rr is not None:
            diff = _num(getattr(rr, "max_rel_diff", None))
            if diff is not None:
                prof.rerun_difference = "tiny" if diff < 1e-3 else "large"
            # the target differs from its own rerun about as much as from the baseline: the gap to
            # the baseline is the run-to-run spread, not a second symptom
            spread = _num(getattr(rr, "mean_rel_diff", None))
            gap = _num(getattr(lc, "mean_rel_err", None)) if lc is not None else None
            if spread is not None and gap is not None and spread >= 0.5 * gap:
                prof.symptoms -= {"first_step_difference", "long_run_difference", "grad_norm_difference"}
                prof.notes.append("gap_within_rerun_spread")
    # a rerun of the target that ran clean where the target hit a NaN: the NaN does not reproduce
    if "nan_overflow" in prof.symptoms and rr is not None:
        rerun_nan = _first(facts, "nan_compare", role="target_rerun")
        rerun_ev = _first(facts, "log_event", role="target_rerun", kind="nan_in_grad")
        if rerun_ev is None and (rerun_nan is None or not getattr(rerun_nan, "target_nan_count", 0)):
            prof.symptoms.add("irreproducible")
            prof.notes.append("nan_not_reproduced")
    if prof.runs is None and prof.symptoms & {"first_step_difference", "long_run_difference",
                                              "grad_norm_difference", "spikes"}:
        prof.runs = "target_only"
    # an S1 gap that does not grow makes the S2 reading redundant (the same gap, seen later)
    if ("first_step_difference" in prof.symptoms and "long_run_difference" in prof.symptoms
            and prof.error_shape in ("constant_ratio", "one_sided", None) and lc is not None):
        early = _num(getattr(lc, "mean_rel_err_early", None))
        late = _num(getattr(lc, "mean_rel_err_late", None))
        if early is not None and late is not None and late <= early * 1.2:
            prof.symptoms.discard("long_run_difference")
    return prof


# ---------------------------------------------------------------- what kind of job it is
# Some modes exist only in some jobs: a router only in a MoE model, sequence-parallel gradients
# only with sequence parallelism, a dynamic loss scale only under fp16, collective communication
# only across several cards. A kb presentation names that as its `scope`. What the facts say of
# each scope is read once per case: True (the job has it), False (read, and it has not) or None
# (nothing read tells). A mode whose scope the job lacks keeps SCOPE_ABSENT of its weight; one
# whose scope is unknown keeps that scope's share of jobs (an expert estimate, like the priors).
SCOPE_ABSENT = 0.08
SCOPES = {
    # scope: (share of jobs when unknown, what it needs in English and Chinese)
    "moe": (0.4, "the model is a mixture of experts", "模型为 MoE（混合专家）"),
    "sequence_parallel": (0.35, "sequence parallelism is on with TP > 1", "开启序列并行且 TP > 1"),
    "fp16": (0.35, "training runs in fp16 with a dynamic loss scale", "以 fp16（动态 loss scale）训练"),
    "multi_card": (1.0, "the job runs on several cards", "任务在多张卡上运行"),
    "sft": (0.5, "the job fine-tunes on instruction data (prompt or padding tokens masked out of the loss)",
            "任务在指令数据上微调（prompt 或 padding token 不计入 loss）"),
}
# the catalogue question (facts/core.py OBSERVATIONS) whose answer settles a scope the artefacts
# leave unknown; the planner asks it when the answer would move the ranking
SCOPE_QUESTIONS = {"moe": "model_is_moe", "fp16": "trains_in_fp16", "sequence_parallel": "sequence_parallel_on",
                   "multi_card": "several_cards", "sft": "instruction_tuning"}
_EXPERT_COUNT = re.compile(r"(?i)(num_?(local_|routed_)?experts|experts?_?num|n_routed_experts)$")
_MOE_NAME = re.compile(r"(?i)(^|[._])(moe|experts?|router)([._]|$)")
# settings only an instruction-tuning job has (TRL, LLaMA-Factory, MindSpeed-LLM, xtuner spellings)
_SFT_NAME = re.compile(r"(?i)(^|[._])(response_template|instruction_template|completion_only(_loss)?|assistant_only(_loss)?|"
                       r"train_on_(prompt|inputs?)|mask_prompt|prompt_loss_weight)$")
_NO_TEMPLATE = {"", "none", "null", "false", "empty"}  # (LLaMA-Factory's "empty": no formatting)
_PARALLEL_SIZES = ("tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size",
                   "expert_model_parallel_size", "data_parallel_size", "world_size")


@dataclass(frozen=True)
class ScopeReading:
    """What the facts say of one scope: `present` True / False / None, and from which fact."""

    present: bool | None
    basis: str = ""
    answered: bool | None = None   # what a person answered, when it contradicts what the artefacts say


def read_scopes(facts: list[Any]) -> dict[str, ScopeReading]:
    """Each scope of SCOPES as the case's facts show it (see above)."""
    values: dict[str, dict[str, list[Any]]] = {}   # config name -> role -> config_value facts
    for f in facts:
        if getattr(f, "type", None) == "config_value":
            values.setdefault(str(getattr(f, "name", None) or ""), {}).setdefault(getattr(f, "role", ""), []).append(f)
    read_roles = {r for by_role in values.values() for r in by_role}

    def number(f: Any) -> float | None:
        n = _num(getattr(f, "number", None))
        return n if n is not None else _num(getattr(f, "value", None))

    def flag(f: Any) -> bool | None:
        b = getattr(f, "flag", None)
        if isinstance(b, bool):
            return b
        return {"true": True, "false": False}.get(str(getattr(f, "value", "")).strip().lower())

    def numbers(name: str) -> list[float]:
        return [n for fs in values.get(name, {}).values() for f in fs if (n := number(f)) is not None]

    def flags(name: str) -> list[bool]:
        return [b for fs in values.get(name, {}).values() for f in fs if (b := flag(f)) is not None]

    def on_every_side(name: str) -> bool:
        return bool(read_roles) and read_roles <= set(values.get(name, {}))

    out: dict[str, ScopeReading] = {}
    # MoE: an expert count above one (under any key that names one: num_experts and its aliases,
    # a nested expert_num), an expert-parallel size above one, a MoE config difference, or an
    # expert/router API in a dump. (Not a router top-k: Megatron prints moe_router_topk 2 for
    # dense models too.)
    counts = [(name, n) for name, by_role in values.items() if _EXPERT_COUNT.search(name)
              for fs in by_role.values() for f in fs if (n := number(f)) is not None]
    ep = numbers("expert_model_parallel_size")
    moe_api = next((api for f in facts if getattr(f, "type", None) in ("first_divergence", "first_nan",
                                                                         "nondeterministic_api")
                    for api in (getattr(f, "api_name", None), getattr(f, "module", None))
                    if isinstance(api, str) and _MOE_NAME.search(api)), None)
    moe_diff = next((getattr(f, "name", "") for f in facts if getattr(f, "type", None) == "config_diff"
                     and (_EXPERT_COUNT.search(str(getattr(f, "name", ""))) or str(getattr(f, "name", "")).startswith("moe_"))),
                    None)
    if any(n > 1 for _, n in counts):
        name, n = max(counts, key=lambda c: c[1])
        out["moe"] = ScopeReading(True, f"{name} {n:g}")
    elif any(n > 1 for n in ep):
        out["moe"] = ScopeReading(True, f"expert_model_parallel_size {max(ep):g}")
    elif moe_diff:
        out["moe"] = ScopeReading(True, f"config difference {moe_diff}")
    elif moe_api:
        out["moe"] = ScopeReading(True, f"dumped API {moe_api}")
    elif counts:
        out["moe"] = ScopeReading(False, f"{counts[0][0]} {max(n for _, n in counts):g}")
    elif read_roles and any(getattr(f, "category", None) == "model" for by_role in values.values()
                            for fs in by_role.values() for f in fs):
        out["moe"] = ScopeReading(False, "the model settings read name no experts")
    else:
        out["moe"] = ScopeReading(None)
    # sequence parallelism: the flag, and TP > 1 (Megatron turns it off at TP 1)
    sp, tp = flags("sequence_parallel"), numbers("tensor_model_parallel_size")
    if any(sp) and not (tp and all(n <= 1 for n in tp)):
        out["sequence_parallel"] = ScopeReading(True, "sequence_parallel true")
    elif tp and all(n <= 1 for n in tp) and on_every_side("tensor_model_parallel_size"):
        out["sequence_parallel"] = ScopeReading(False, "tensor_model_parallel_size 1")
    elif sp and not any(sp) and on_every_side("sequence_parallel"):
        out["sequence_parallel"] = ScopeReading(False, "sequence_parallel false")
    else:
        out["sequence_parallel"] = ScopeReading(None)
    # fp16 with a loss scale
    fp16, bf16 = flags("fp16"), flags("bf16")
    trends = [f for f in facts if getattr(f, "type", None) == "loss_scale_trend"
              and getattr(f, "values_from", "absent") != "absent"]
    dynamic = next((f for f in trends if (_num(getattr(f, "max", None)) or 0) > 1
                    or getattr(f, "n_decreases", 0) or getattr(f, "values_from", None) == "overflow_events"), None)
    if any(fp16):
        out["fp16"] = ScopeReading(True, "fp16 true")
    elif dynamic is not None:
        out["fp16"] = ScopeReading(True, f"the {getattr(dynamic, 'role', '')} log's loss scale moves "
                                         f"(up to {_num(getattr(dynamic, 'max', None)) or 0:g})")
    elif trends and {getattr(f, "role", None) for f in trends} >= {"baseline", "target"} and all(
            _num(getattr(f, "max", None)) == 1.0 == _num(getattr(f, "min", None)) for f in trends):
        out["fp16"] = ScopeReading(False, "both logs' loss scale stays 1.0")
    elif bf16 and all(bf16) and on_every_side("bf16"):
        out["fp16"] = ScopeReading(False, "bf16 true")
    elif fp16 and on_every_side("fp16"):
        out["fp16"] = ScopeReading(False, "fp16 false")
    else:
        out["fp16"] = ScopeReading(None)
    # several cards: a parallel size above one, several hosts or grouped runs, dumps of several ranks
    sizes = {name: numbers(name) for name in _PARALLEL_SIZES}
    big = next((f"{name} {max(ns):g}" for name, ns in sizes.items() if any(n > 1 for n in ns)), None)
    hosts = any((getattr(f, "host_count", 0) or 0) > 1 or getattr(f, "grouped", False)
                for f in facts if getattr(f, "type", None) == "run")
    ranks = {getattr(f, "rank", None) for f in facts if getattr(f, "type", None) == "dump_info"} - {None}
    if big or hosts or len(ranks) > 1:
        out["multi_card"] = ScopeReading(True, big or ("several hosts" if hosts else f"dumps of {len(ranks)} ranks"))
    elif sizes["world_size"] and all(n <= 1 for n in sizes["world_size"]) and on_every_side("world_size"):
        out["multi_card"] = ScopeReading(False, "world_size 1")
    else:
        out["multi_card"] = ScopeReading(None)
    # instruction tuning: a setting only such a job has (a response template, prompt masking, an
    # instruction dataset flag) or a chat template in use; not one: the instruction-dataset flag
    # false, or the data being Megatron pretraining corpora (preprocess_data's `_text_document`)
    # with no template
    def texts(name: str) -> list[str]:
        return [str(getattr(f, "value", "")).strip() for fs in values.get(name, {}).values() for f in fs]

    instruct = flags("is_instruction_dataset")
    templates = [t for t in texts("template") if t.lower() not in _NO_TEMPLATE]
    stages = {t.lower() for t in texts("stage")}  # LLaMA-Factory's training stage: sft, or pt (pretraining)
    sft_on = next((f"{name} {getattr(f, 'value', '')}".strip() for name, by_role in values.items()
                   if _SFT_NAME.search(name) for fs in by_role.values() for f in fs
                   if flag(f) is not False and str(getattr(f, "value", "")).strip().lower() not in _NO_TEMPLATE), None)
    sft_on = (sft_on  # (a difference in such a setting: both sides have it)
              or next((f"config difference {getattr(f, 'name', '')}" for f in facts if getattr(f, "type", None) ==
                       "config_diff" and _SFT_NAME.search(str(getattr(f, "name", "")))), None)
              or ("is_instruction_dataset true" if any(instruct) else None)
              or (f"template {templates[0]}" if templates else None)
              or ("stage sft" if "sft" in stages else None))
    corpora = texts("data_path")
    if sft_on is not None:
        out["sft"] = ScopeReading(True, sft_on)
    elif instruct and not any(instruct):
        out["sft"] = ScopeReading(False, "is_instruction_dataset false")
    elif stages == {"pt"}:
        out["sft"] = ScopeReading(False, "stage pt")
    elif corpora and all(re.search(r"_text_document\b", c) for c in corpora) and on_every_side("data_path"):
        out["sft"] = ScopeReading(False, "the data are pretraining corpora (…_text_document)")
    else:
        out["sft"] = ScopeReading(None)
    # what a person answered settles what the artefacts leave unknown (they win where they tell)
    answered = {getattr(f, "name", None): getattr(f, "value", None) for f in facts
                if getattr(f, "type", None) == "observation"}
    for scope, question in SCOPE_QUESTIONS.items():
        value = answered.get(question)
        if isinstance(value, bool) and out[scope].present is None:
            out[scope] = ScopeReading(value, "as answered")
        elif isinstance(value, bool) and value != out[scope].present:
            out[scope] = ScopeReading(out[scope].present, out[scope].basis, answered=value)
    return out


def scope_factor(scope: str | None, prof: "Profile") -> float:
    """The share of a mode's weight its scope leaves it in this case (1.0 without a scope)."""
    if not scope or scope not in SCOPES:
        return 1.0
    reading = prof.scopes.get(scope)
    if reading is None or reading.present is None:
        return SCOPES[scope][0]
    return 1.0 if reading.present else SCOPE_ABSENT


def describe_scope(scope: str | None, prof: "Profile", lang: str = "en") -> str:
    """One sentence on what the mode needs and what the case shows of it ('' without a scope)."""
    if not scope or scope not in SCOPES:
        return ""
    _, en, zh = SCOPES[scope]
    reading = prof.scopes.get(scope) or ScopeReading(None)
    if lang == "zh":
        if reading.present is None:
            return f"仅当{zh}时适用；现有材料无法判断是否如此，按一般比例计。"
        return f"仅当{zh}时适用；材料显示{'如此' if reading.present else '并非如此'}（{reading.basis}）。"
    if reading.present is None:
        return f"Applies only when {en}; nothing read tells whether it does here, so it counts at the usual share."
    return f"Applies only when {en}; the facts say it {'does' if reading.present else 'does not'} here ({reading.basis})."


_MAG_ORDER = ("none", "noise", "small", "large")


def _match(expected: str | None, observed: str | None, *, hit: float, miss: float,
           order: tuple[str, ...] | None = None) -> float:
    if expected in (None, "any") or observed is None:
        return 1.0
    allowed = list(expected) if isinstance(expected, (list, tuple)) else [expected]
    if observed in allowed:
        # a presentation that admits several values spreads its likelihood over them
        return 1.0 + (hit - 1.0) / len(allowed)
    if order and observed in order and any(a in order for a in allowed):
        if min(abs(order.index(a) - order.index(observed)) for a in allowed if a in order) == 1:
            return (1.0 + miss) / 2
    return miss


def score_mode(pres: Any, prof: Profile) -> float:
    """How well one presentation explains the profile (unnormalised, prior included)."""
    lik = 1.0
    for s in prof.symptoms:
        floor = SECONDARY_ABSENT if prof.secondary(s) else ABSENT
        lik *= max(LIKELIHOOD.get(pres.symptoms.get(s), 0.0), floor)
    typical = [s for s, v in pres.symptoms.items() if v == "typical"]
    if typical and not any(s in prof.symptoms for s in pres.symptoms):
        lik *= 0.3  # none of the mode's symptoms is present
    runs = pres.runs
    if runs == "rerun_differs" and prof.runs != "rerun_differs":
        lik *= 0.35
    elif runs == "both" and prof.runs == "target_only":
        lik *= 0.35
    elif runs == "target_only" and prof.runs == "both":
        lik *= 0.3
    lik *= _match(pres.onset, prof.onset, hit=1.15, miss=0.6)
    lik *= _match(pres.step1_magnitude, prof.step1_magnitude, hit=1.15, miss=0.45, order=_MAG_ORDER)
    lik *= _match(pres.error_shape, prof.error_shape, hit=1.2, miss=0.7)
    lik *= _match(getattr(pres, "rerun_difference", "any"), prof.rerun_difference, hit=1.3, miss=0.4)
    lik *= scope_factor(getattr(pres, "scope", None), prof)
    return lik * PRIOR.get(pres.frequency, 0.5)


@dataclass
class DifferentialEntry:
    mode: str
    weight: float
    fit: float


def differential(prof: Profile, kb: dict[str, Any]) -> list[DifferentialEntry]:
    """Modes ranked by how well their presentation explains the profile; empty when the case
    shows no misaligning symptom."""
    cap = DIFFERENTIAL_CAP
    if prof.own and not prof.tentative:
        # the target's own curve alone: rank on what it shows (with what a person reported), at
        # the tentative weight unless a reported symptom is established, the baseline's side unknown
        cap = DIFFERENTIAL_CAP if prof.symptoms & set(MISALIGNING) else TENTATIVE_CAP
        prof = Profile(symptoms=prof.symptoms | prof.own, runs=None, onset=prof.onset, scopes=prof.scopes,
                       own=set(prof.own))
    elif not prof.symptoms & set(MISALIGNING):
        if not prof.tentative:
            return []
        # too few points for a symptom: rank on the tentative gap, at a lower weight
        prof = Profile(symptoms=set(prof.tentative), runs=prof.runs or "target_only", onset=prof.onset,
                       step1_magnitude=prof.step1_magnitude, error_shape=prof.error_shape,
                       steps_compared=prof.steps_compared, rerun_difference=prof.rerun_difference,
                       scopes=prof.scopes)
        cap = TENTATIVE_CAP
    raw: dict[str, float] = {}
    for mid, entry in kb.items():
        pres = getattr(entry, "presentation", None)
        if pres is None or getattr(entry, "verdict", "misaligned") != "misaligned":
            continue
        if not getattr(entry, "canonical", True):
            continue  # extras (RL) join only through their own rules
        raw[mid] = score_mode(pres, prof)
    return _ranked(raw, cap)


def _ranked(raw: dict[str, float], cap: float) -> list[DifferentialEntry]:
    """Scores scaled so the best is `cap`, the weakest (below MIN_WEIGHT at that scale) left out."""
    top = max(raw.values(), default=0.0)
    if top <= 0:
        return []
    out = [DifferentialEntry(m, round(cap * v / top, 4), v) for m, v in raw.items()]
    out = [e for e in out if e.weight >= MIN_WEIGHT * cap / DIFFERENTIAL_CAP]
    out.sort(key=lambda e: (-e.weight, e.mode))
    return out[:MAX_MODES]


# ---------------------------------------------------------------- nothing to compare with
# One run's log alone, or a baseline without a log: no symptom can be established, yet the user
# came with a problem. The modes are then ranked by their prior alone (kb frequency, an expert
# estimate, times the job's scopes), at a weight below any symptom's, and the step that splits
# them is the reference the case lacks.
PRIOR_CAP = 0.1
COMPARED = frozenset({"loss_compare", "grad_norm_compare", "nan_compare", "spike_compare", "rerun_compare",
                      "first_divergence", "first_nan", "dump_step_compare", "nondeterministic_api",
                      "compare_result_summary", "grad_monitor_compare", "eval_gap"})


def without_reference(facts: list[Any]) -> bool:
    """Nothing was compared and no baseline run brought a log, dump or compare result."""
    if any(getattr(f, "type", None) in COMPARED for f in facts):
        return False
    return not any(getattr(f, "type", None) == "run" and getattr(f, "role", None) == "baseline"
                   and (getattr(f, "has_log", False) or getattr(f, "has_dump", False)
                        or getattr(f, "has_compare", False) or getattr(f, "has_monitor", False)) for f in facts)


def no_common_steps(facts: list[Any]) -> bool:
    """The target's and the baseline's logs hold training points but no step in common: the curves
    could not be compared (a rerun's comparison does not count: the target's is the one)."""
    return any(getattr(f, "type", None) == "loss_compare" and getattr(f, "role", None) == "target"
               and not getattr(f, "steps_compared", 0)
               and getattr(f, "run_last_step", None) is not None and getattr(f, "against_last_step", None) is not None
               for f in facts)


def one_run_alone(facts: list[Any]) -> bool:
    """The target brought a log, dump, compare result, monitor output or config, and nothing was
    compared with it (a chat or `precdx ask` that starts from no artefact at all is not this)."""
    brought = any(getattr(f, "type", None) == "run" and getattr(f, "role", None) == "target"
                  and any(getattr(f, k, False) for k in ("has_log", "has_dump", "has_compare", "has_monitor",
                                                         "has_config")) for f in facts)
    return brought and without_reference(facts)


def prior_differential(prof: Profile, kb: dict[str, Any]) -> list[DifferentialEntry]:
    """The modes by prior alone (frequency x scope), the most common first, capped at PRIOR_CAP."""
    raw: dict[str, float] = {}
    for mid, entry in kb.items():
        pres = getattr(entry, "presentation", None)
        if pres is None or getattr(entry, "verdict", "misaligned") != "misaligned" or not getattr(entry, "canonical", True):
            continue
        if not set(pres.symptoms) & {"first_step_difference", "long_run_difference", "nan_overflow", "spikes"}:
            continue  # modes seen only through reruns or downstream are not what brings one log
        raw[mid] = PRIOR.get(pres.frequency, 0.5) * scope_factor(getattr(pres, "scope", None), prof)
    return _ranked(raw, PRIOR_CAP)


# What the checklist can see: a mode (or a family, by id prefix) and the fact types that must have
# been collected on both sides before "no rule fired" means "the checklist found nothing".
CHECKLIST_VISIBLE = (
    ("config.", frozenset({"config_value"})),
    ("env.library_version_mismatch", frozenset({"library_version"})),
    ("env.hf32_tf32_mismatch", frozenset({"env_switch"})),
)


def _read_on_both_sides(facts: list[Any], types: frozenset[str]) -> bool:
    roles = {getattr(f, "role", None) for f in facts if getattr(f, "type", None) in types}
    return {"baseline", "target"} <= roles


# The settings a configuration mode is about (canonical names, collectors/checklist/aliases.py),
# its category, and how many of them both sides must name for "found nothing" to be a thorough
# look: a full argument echo (Megatron prints every argument with its default) names them all, a
# short YAML of overrides a few.
CHECKLIST_COVERAGE = {
    "config.hyperparameter_mismatch": ("hyperparameter", frozenset({
        "lr", "min_lr", "lr_decay_style", "lr_warmup_iters", "lr_warmup_fraction", "train_iters", "global_batch_size",
        "micro_batch_size", "weight_decay", "adam_beta1", "adam_beta2", "adam_eps", "clip_grad", "hidden_dropout",
        "attention_dropout"}), 8),
    "config.parallel_strategy_mismatch": ("parallel", frozenset({
        "tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size",
        "expert_model_parallel_size", "sequence_parallel", "use_distributed_optimizer"}), 4),
}


def _covered(facts: list[Any], mode: str) -> bool:
    """Whether both sides' configurations name enough of the settings `mode` is about, and none of
    that category differs in a way that matters."""
    spec = CHECKLIST_COVERAGE.get(mode)
    if spec is None:
        return False
    category, names, least = spec
    seen: dict[str, set[str]] = {"baseline": set(), "target": set()}
    for f in facts:
        ftype = getattr(f, "type", None)
        if ftype == "config_diff" and getattr(f, "category", None) == category and getattr(f, "relevant", False):
            return False
        if ftype == "config_value" and getattr(f, "name", None) in names:
            role = getattr(f, "role", None)
            if role in seen:
                seen[role].add(f.name)
    return len(seen["baseline"] & seen["target"]) >= least


def checklist_against(facts: list[Any], pack: Any, fired_modes: set[str], modes: Iterable[str]) -> dict[str, float]:
    """The checklist was read on both sides and found nothing for a mode only the checklist can
    show: argue against it (configuration differences need a differing setting to exist), the
    more when both sides name most of the settings the mode is about."""
    out: dict[str, float] = {}
    for m in modes:
        if m in fired_modes:
            continue
        for prefix, types in CHECKLIST_VISIBLE:
            if (m == prefix or (prefix.endswith(".") and m.startswith(prefix))) and _read_on_both_sides(facts, types):
                out[m] = CHECKLIST_COVERED_AGAINST if _covered(facts, m) else CHECKLIST_CLEAN_AGAINST
                break
    return out


def procedure_against(prof: Profile, kb: dict[str, Any], modes: Iterable[str]) -> dict[str, float]:
    """The procedure's order as contradicting weight: with a NaN established on the target only,
    modes that never present a NaN are explanations of a later stage."""
    out: dict[str, float] = {}
    if "nan_overflow" in prof.symptoms and prof.runs == "target_only":
        for mid in modes:
            pres = getattr(kb.get(mid), "presentation", None)
            if pres is not None and "nan_overflow" not in pres.symptoms:
                out[mid] = NAN_FIRST_AGAINST
    return out


# ---------------------------------------------------------------- the step that splits it
@dataclass(frozen=True)
class Probe:
    """A piece of evidence a user can add, the fact types it brings, and what it costs."""

    id: str
    cost: str
    fact_types: frozenset[str]
    action: tuple[str, str]       # en, zh
    command: str | None
    why: tuple[str, str]


def _probes() -> tuple[Probe, ...]:
    from precdx.facts import REGISTRY

    by_collector: dict[str, set[str]] = {}
    for name, spec in REGISTRY.items():
        for c in getattr(spec, "collectors", ()) or ():
            by_collector.setdefault(c, set()).add(name)
    checklist = frozenset(by_collector.get("checklist", set()))
    msprobe = frozenset(by_collector.get("msprobe", set()))
    return (
        Probe("baseline", "read", frozenset({"loss_compare"}),
              ("Add the baseline run's training log (--baseline PATH, or baseline/ beside target/) and diagnose "
               "again: with no reference run, no gap can be measured",
               "补充标杆侧训练日志（--baseline PATH，或与 target/ 并列的 baseline/）后重新诊断：没有参照运行就无法度量差异"),
              "precdx diagnose --baseline BASELINE_LOG --target TARGET_LOG",
              ("every symptom (a first-step gap, a drift, NaN only on one side) is measured against the baseline",
               "所有症状（首步差异、长稳漂移、仅一侧出现 NaN）都要与标杆对比才能确立")),
        Probe("common_steps", "rerun", frozenset({"loss_compare"}),
              ("Rerun one side over the other's steps (same seed, data and start checkpoint) so that both logs "
               "share a range of steps, and diagnose again: the two logs have no step in common",
               "让一侧在另一侧的 step 范围上重跑（相同种子、数据与起始权重），使两份日志有共同的 step 后重新诊断：当前两份日志没有共同 step"),
              None,
              ("every curve symptom is measured on the steps both logs hold",
               "所有曲线症状都在两份日志共有的 step 上度量")),
        Probe("configs", "read", checklist,
              ("Add both runs' launch script / training config, `env` listing and `pip freeze` beside each log "
               "(baseline/ and target/) and diagnose again",
               "在 baseline/ 与 target/ 日志旁补充两侧的启动脚本/训练配置、`env` 输出与 `pip freeze`，然后重新诊断"),
              "env > target/env.txt && pip freeze > target/pip_freeze.txt   # on each machine, next to its log",
              ("the checklist (configuration, environment, library versions) comes first in the guide's "
               "procedure and is free to read",
               "检查清单（配置、环境、库版本）是定位流程的第一步，且无需额外运行")),
        Probe("target_rerun", "rerun", frozenset({"rerun_compare"}),
              ("Rerun the target job unchanged (same seed and data) with its log in target_rerun/ and diagnose again",
               "原样重跑目标侧作业（相同种子和数据），日志放在 target_rerun/ 下后重新诊断"),
              None,
              ("a rerun that differs separates randomness and nondeterminism from a deterministic difference",
               "重跑结果若不同，即可把随机性/不确定性与确定性差异区分开")),
        Probe("dump", "dump", msprobe,
              ("Dump the first diverging step on both sides with msprobe (task statistics, level mix) into "
               "msprobe_dump/ of each run and diagnose again",
               "用 msprobe 在两侧 dump 首个出现差异的 step（task statistics，level mix），放入各自的 msprobe_dump/ 后重新诊断"),
              None,
              ("the first diverging or first non-finite API names the operator, the module or the data",
               "首个出现差异或非有限值的 API 能指出具体算子、模块或数据")),
    )


def _present(facts: list[Any], probe: Probe) -> bool:
    if probe.id == "baseline":
        return not one_run_alone(facts)
    if probe.id == "common_steps":
        return not no_common_steps(facts)
    if probe.id == "target_rerun":
        return any(getattr(f, "type", None) == "rerun_compare" and getattr(f, "role", None) == "target"
                   for f in facts)
    if probe.id == "configs":
        # a run whose configuration was read leaves config_value / env_switch facts behind
        return any(getattr(f, "type", None) in ("config_value", "config_diff", "env_switch", "library_version")
                   for f in facts)
    return any(getattr(f, "type", None) in probe.fact_types for f in facts)


def probe_modes(pack: Any, probe: Probe) -> set[str]:
    """The modes the probe's facts can confirm or exclude: every mode a rule reading them names."""
    decided: set[str] = set()
    for rule in pack.rules:
        types = {p.fact_type for alt in rule.alternatives for p in (*alt.positives, *alt.negatives)}
        if types & probe.fact_types:
            decided.update(rule.rule.failure_modes)
            decided.update(rule.rule.against)
    return decided


def split_step(facts: list[Any], pack: Any, belief: dict[str, float], *, lang: str = "en",
               reference_first: bool = False) -> dict | None:
    """The cheapest missing piece of evidence that best splits the belief over modes: for each
    probe, the mass of the modes its facts can confirm or exclude (via the pack's rules), valued
    mass x (1 - mass) (an even split is worth most) per cost weight. The reference comes before
    anything measured against it: with `reference_first` (a belief from priors alone: nothing to
    compare with) the baseline's log, and with two logs of no common step, an overlapping rerun."""
    from precdx.vocabulary import COST_LABELS, COST_LABELS_ZH

    total = sum(belief.values())
    if total <= 0:
        return None
    dist = {m: v / total for m, v in belief.items()}
    cost_weight = {"read": 1.0, "rerun": 2.0, "dump": 4.0, "long_run": 8.0, "cluster": 16.0}
    best = None
    idx = 1 if lang == "zh" else 0

    def answer(probe: Probe, modes: list[str]) -> dict:
        return {"id": probe.id, "action": probe.action[idx], "command": probe.command, "why": probe.why[idx],
                "cost": probe.cost, "cost_label": (COST_LABELS_ZH if lang == "zh" else COST_LABELS)[probe.cost],
                "modes": modes}

    first = "baseline" if reference_first else "common_steps" if no_common_steps(facts) else None
    for probe in _probes():
        if probe.id in ("baseline", "common_steps"):
            if probe.id == first:  # the reference comes before anything it is compared with
                return answer(probe, sorted(dist))
            continue
        if _present(facts, probe):
            continue
        decided = probe_modes(pack, probe)
        mass = sum(p for m, p in dist.items() if m in decided)
        if mass <= 0:
            continue
        value = (mass * (1.0 - mass) + 0.25 * mass) / cost_weight[probe.cost]
        if best is None or value > best[0]:
            best = (value, probe, sorted(m for m in dist if m in decided))
    if best is None:
        return None
    _, probe, modes = best
    return answer(probe, modes)
