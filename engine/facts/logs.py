"""Fact types from training logs: each run's loss curve, and the loss-curve symptoms of the target
against the baseline (and of reruns against their run) that the diagnosis procedure starts from.

Relative errors are |target - baseline| / |baseline| per common logged step (ratio, 0.01 = 1%).
Steps are the iteration numbers the logs print (1-based for Megatron). Facts carry measurements;
rules apply the tolerances (kb §1.3: mean loss error 1%, first loss 0.5% / 0.005 abs, grad-norm
mean error 10%, NaN counts within 50-step windows), named once as the thresholds of
kb/verdict/aligned.within_noise.yaml.
"""
from __future__ import annotations

import re
from typing import Any, Literal, Optional

from pydantic import model_validator

from precdx.facts.base import Bool, F, Fact, Int, Num, fact_type
from precdx.vocabulary import Role

# `Optional[str]`, not `str | None`: the registry's type check accepts typing.Union only.
_C = ("logs",)


@fact_type("loss_series", collectors=_C, identity=("run",))
class LossSeries(Fact):
    """One run's training curve as parsed from its log (or trainer_state.json)."""

    role: Role = F("which side of the comparison the run is")
    run: str = F("run name, e.g. 'target' or 'target/group03' for a grouped run")
    group: Optional[str] = F("group folder of a grouped run (e.g. 'group03'), absent otherwise")
    framework: str = F("log format the curve came from: megatron, mindspeed-llm, megatron-deepspeed, "
                       "hf_trainer, hf_trainer_state, torchtitan, nemo2, nemo_bar, olmo, deepspeed, ... "
                       "or the name of a user-declared format")
    n_points: Int = F("number of logged training points (after de-duplicating repeated steps)", unit="count")
    first_step: Int | None = F("first logged step", unit="steps")
    last_step: Int | None = F("last logged step", unit="steps")
    log_interval: Int | None = F("median step distance between logged points", unit="steps")
    windowed: Bool = F("logged values are averages over the log interval (Megatron, HF Trainer, NeMo)")
    step_inferred: Bool = F("the log prints no step; steps were taken from the progress bar or the line order")
    first_loss: Num | None = F("loss at the first logged step (NaN if non-finite)", unit="loss")
    last_loss: Num | None = F("loss at the last logged step (NaN if non-finite)", unit="loss")
    min_loss: Num | None = F("smallest finite loss logged", unit="loss")
    nan_count: Int = F("logged points whose loss or grad norm was non-finite (incl. loss keys a framework "
                       "drops for non-finite values)", unit="count")
    first_nan_step: Int | None = F("first step with a non-finite loss or grad norm", unit="steps")
    skipped_count: Int = F("iterations reported skipped (sum of per-window counters / DeepSpeed deltas)",
                           unit="count")
    overflow_events: Int = F("DeepSpeed loss-scaler OVERFLOW/skip lines", unit="count")
    restarts: Int = F("times the logged step went backwards (job restarted from a checkpoint)", unit="count")
    has_grad_norm: Bool = F("the log prints a grad norm")
    has_loss_scale: Bool = F("the log prints a loss scale")
    eval_points: Int = F("evaluation/validation records seen", unit="count")


@fact_type("loss_compare", collectors=_C, identity=("run", "against"))
class LossCompare(Fact):
    """Loss curve of a target-side run against a reference run on their common steps."""

    run: str = F("compared run: 'target', 'target_rerun' or 'target/groupNN'")
    role: Role = F("role of the compared run")
    against: str = F("reference run name", default="baseline")
    steps_compared: Int = F("common logged steps compared", unit="count")
    first_step: Int | None = F("first common step", unit="steps")
    last_step: Int | None = F("last common step", unit="steps")
    run_last_step: Int | None = F("last step the compared run logged", unit="steps")
    against_last_step: Int | None = F("last step the reference run logged", unit="steps")
    stopped_early: Bool = F("the compared run logged fewer steps than the reference (crash, kill, abort)")
    first_step_rel_err: Num | None = F("relative loss error at the first common step", unit="ratio")
    first_step_abs_err: Num | None = F("absolute loss error at the first common step", unit="loss")
    second_step_rel_err: Num | None = F("relative loss error at the second common step (a jump from a "
                                        "matching first step means the first update differs)", unit="ratio")
    first_departed_step: Int | None = F("first common step whose relative loss error exceeds the step "
                                        "tolerance (threshold step_rel_err, 1%)", unit="steps",
                                        was="first_rel_err_over_1pct_step")
    mean_rel_err: Num | None = F("mean relative loss error over all finite common steps", unit="ratio")
    mean_rel_err_early: Num | None = F("mean relative loss error over the first third of common steps",
                                       unit="ratio")
    mean_rel_err_late: Num | None = F("mean relative loss error over the last third of common steps",
                                      unit="ratio")
    max_rel_err: Num | None = F("largest relative loss error at a common step (NaN if a loss was non-finite)",
                                unit="ratio")
    mean_signed_rel_err: Num | None = F("mean of (target - reference)/|reference|: > 0 means target loss "
                                        "is higher", unit="ratio")
    final_rel_err: Num | None = F("relative error of the mean loss over the last 10 common steps", unit="ratio")
    drift_slope: Num | None = F("least-squares slope of the signed relative error", unit="ratio per 1000 steps")
    ratio_mean: Num | None = F("mean of target loss / reference loss", unit="ratio")
    ratio_cv: Num | None = F("coefficient of variation of that ratio: small with ratio_mean far from 1 "
                             "means a roughly constant ratio (loss-definition difference)", unit="ratio")
    noise_band: Num | None = F("run-to-run relative loss difference of the baseline measured from a "
                               "baseline rerun (95th percentile); absent without a baseline rerun", unit="ratio")
    band_used: Num = F("band used to call a divergence sustained: noise_band (at least 0.1%) when "
                       "measured, else 0.01", unit="ratio")
    within_noise_band: Bool | None = F("mean_rel_err <= noise_band (only when a baseline rerun measured it)")
    first_divergence_step: Int | None = F("first step of a run of >= 5 consecutive common steps whose "
                                          "relative error exceeds band_used (not one noisy point); absent "
                                          "if never", unit="steps")


@fact_type("rerun_compare", collectors=_C, identity=("role",))
class RerunCompare(Fact):
    """A run against its own rerun (same side, same job launched again): reproducibility."""

    role: Literal["baseline", "target"] = F("side whose run and rerun are compared")
    run: str = F("run name")
    rerun: str = F("rerun name")
    steps_compared: Int = F("common logged steps", unit="count")
    identical: Bool = F("every common logged loss and grad norm is equal as printed (bitwise for the "
                        "printed precision)")
    first_step_identical: Bool = F("the loss at the first common step is equal as printed")
    first_diff_step: Int | None = F("first common step whose loss or grad norm differs", unit="steps")
    first_diff_dump_step: Int | None = F("msprobe step number (0-based) of first_diff_step: the step to dump",
                                         unit="steps")
    max_rel_diff: Num | None = F("largest relative loss difference at a common step", unit="ratio")
    mean_rel_diff: Num | None = F("mean relative loss difference over common steps", unit="ratio")


@fact_type("grad_norm_compare", collectors=_C, identity=("run", "against"))
class GradNormCompare(Fact):
    """Grad-norm curve of a target-side run against the reference, and whether it departs before the loss."""

    run: str = F("compared run")
    role: Role = F("role of the compared run")
    against: str = F("reference run name", default="baseline")
    steps_compared: Int = F("common steps where both logged a grad norm", unit="count")
    first_step_rel_err: Num | None = F("relative grad-norm error at the first common step", unit="ratio")
    mean_rel_err: Num | None = F("mean relative grad-norm error over finite common steps", unit="ratio")
    max_rel_err: Num | None = F("largest relative grad-norm error", unit="ratio")
    first_divergence_step: Int | None = F("first step of >= 5 consecutive steps with relative grad-norm "
                                          "error above 10%", unit="steps")
    loss_divergence_step: Int | None = F("first_divergence_step of the loss for the same pair", unit="steps")
    departs_before_loss: Bool | None = F("the grad norm diverges and the loss diverges later or never")
    lead_steps: Int | None = F("loss divergence step minus grad-norm divergence step (> 0: grad norm first)",
                               unit="steps")
    late_growth_ratio: Num | None = F("(target late/early mean grad norm) / (reference late/early): > 1 "
                                      "means the target's grad norm grows more over the run", unit="ratio")
    ratio_mean: Num | None = F("mean of target grad norm / reference grad norm: a loss defined at another scale "
                               "for training moves it by the loss's ratio, one only logged differently leaves it "
                               "at 1", unit="ratio")
    ratio_cv: Num | None = F("coefficient of variation of that ratio", unit="ratio")


@fact_type("nan_compare", collectors=_C, identity=("run", "against"))
class NanCompare(Fact):
    """Non-finite and skipped iterations of a target-side run and the reference, also per 50-step window."""

    run: str = F("compared run")
    role: Role = F("role of the compared run")
    against: str = F("reference run name", default="baseline")
    target_nan_count: Int = F("compared run: points with non-finite loss/grad norm (or framework nan counter)",
                              unit="count")
    against_nan_count: Int = F("reference: same count", unit="count", was="baseline_nan_count")
    target_skipped_count: Int = F("compared run: skipped iterations", unit="count")
    against_skipped_count: Int = F("reference: skipped iterations", unit="count", was="baseline_skipped_count")
    target_first_nan_step: Int | None = F("compared run: first non-finite step", unit="steps")
    against_first_nan_step: Int | None = F("reference: first non-finite step", unit="steps", was="baseline_first_nan_step")
    target_max_nan_50: Int = F("compared run: most NaN iterations within any 50-step window", unit="count")
    against_max_nan_50: Int = F("reference: most NaN iterations within any 50-step window", unit="count", was="baseline_max_nan_50")
    target_max_skipped_50: Int = F("compared run: most skipped iterations within any 50-step window",
                                   unit="count")
    against_max_skipped_50: Int = F("reference: most skipped iterations within any 50-step window",
                                     unit="count", was="baseline_max_skipped_50")
    target_overflow_events: Int = F("compared run: DeepSpeed overflow lines", unit="count")
    against_overflow_events: Int = F("reference: DeepSpeed overflow lines", unit="count", was="baseline_overflow_events")


@fact_type("loss_scale_trend", collectors=_C, identity=("run",))
class LossScaleTrend(Fact):
    """How a run's (fp16) loss scale moved over the log."""

    run: str = F("run name")
    role: Role = F("role of the run")
    values_from: Literal["log", "overflow_events", "absent"] = F("where the values came from: the per-iteration "
                                                            "lines, DeepSpeed overflow lines, or nowhere")
    trend: Literal["falling", "stable", "rising", "absent"] = F("overall direction of the loss scale")
    first: Num | None = F("first loss scale seen", unit="scale")
    last: Num | None = F("last loss scale seen", unit="scale")
    min: Num | None = F("smallest loss scale seen", unit="scale")
    max: Num | None = F("largest loss scale seen", unit="scale")
    n_decreases: Int = F("times the logged scale went down", unit="count", default=0)
    n_increases: Int = F("times the logged scale went up", unit="count", default=0)
    collapsed: Bool = F("the scale fell to <= 1 from above, or ended >= 1024x below its maximum", default=False)


@fact_type("spike_compare", collectors=_C, identity=("run", "against"))
class SpikeCompare(Fact):
    """Loss (and grad-norm) spikes of a target-side run against the reference: a point more than 10%
    and 6 robust deviations above the median of the 10 points before it."""

    run: str = F("compared run")
    role: Role = F("role of the compared run")
    against: str = F("reference run name", default="baseline")
    target_spikes: Int = F("loss spikes in the compared run", unit="count")
    against_spikes: Int = F("loss spikes in the reference", unit="count", was="baseline_spikes")
    target_rate: Num = F("compared run: loss spikes per 1000 logged steps", unit="per 1000 steps")
    against_rate: Num = F("reference: loss spikes per 1000 logged steps", unit="per 1000 steps", was="baseline_rate")
    rate_ratio: Num | None = F("target_rate / baseline_rate (inf when the reference has none; absent when "
                               "neither has any)", unit="ratio")
    target_first_spike_step: Int | None = F("first loss spike step of the compared run", unit="steps")
    target_recovered: Int = F("compared-run spikes after which the loss came back within 10 points "
                              "(rise-and-fall shape)", unit="count")
    target_gn_spikes: Int = F("grad-norm spikes in the compared run", unit="count")
    against_gn_spikes: Int = F("grad-norm spikes in the reference", unit="count", was="baseline_gn_spikes")


@fact_type("group_outlier", collectors=_C, identity=("run",))
class GroupOutlier(Fact):
    """One grouped run (same job on a different node group) measured against the other groups."""

    run: str = F("grouped run name, e.g. 'target/group03'")
    role: Role = F("role of the grouped runs")
    group: str = F("group folder name")
    mean_rel_err_vs_groups: Num | None = F("mean relative loss error against the median curve of the other "
                                           "groups", unit="ratio")
    gn_rel_err_vs_groups: Num | None = F("mean relative grad-norm error against the median grad-norm curve of "
                                         "the other groups", unit="ratio")
    mean_rel_err_vs_baseline: Num | None = F("mean relative loss error against the baseline", unit="ratio")
    spikes: Int = F("loss spikes in this group's curve", unit="count")
    gn_spikes: Int = F("grad-norm spikes in this group's curve", unit="count")
    nan_count: Int = F("non-finite points in this group's curve", unit="count")
    z_score: Num | None = F("larger robust z-score (median/MAD, MAD floored, capped at 1e6) of the group's loss "
                            "and grad-norm deviation among all groups", unit="sigma")
    is_outlier: Bool = F("loss deviation z > 3.5 and > 0.01%, or grad-norm deviation z > 3.5 and > 1%, or "
                         "this group alone has NaN points, loss spikes or grad-norm spikes")
    hosts: Optional[str] = F("hosts of the group from hosts.txt, comma-joined", match=False)


@fact_type("group_summary", collectors=_C, identity=("role",))
class GroupSummary(Fact):
    """The grouped runs of one side taken together."""

    role: Role = F("side holding grouped runs")
    n_groups: Int = F("number of grouped runs with a parsed log", unit="count")
    n_outliers: Int = F("groups flagged is_outlier", unit="count")
    max_z_score: Num | None = F("largest group z_score", unit="sigma")
    spread: Num | None = F("median over groups of mean_rel_err_vs_groups", unit="ratio")
    outlier_groups: Optional[str] = F("outlier group names, comma-joined", match=False)
    outlier_hosts: Optional[str] = F("hosts of the outlier groups, comma-joined", match=False)


@fact_type("log_event", collectors=_C, identity=("run", "kind"))
class LogEvent(Fact):
    """Lines of one kind found in a run's log (rerun-state-machine verdicts, spike or silent-data
    detectors, NaN checks, tracebacks, OOM, restarts), aggregated per run and kind."""

    run: str = F("run name")
    role: Role = F("role of the run")
    kind: Literal[
        "rerun_unexpected_result", "rerun_not_reproducible", "rerun_reproducible", "rerun_transient_error",
        "rerun_persistent_error", "rerun_application_error", "spike_detected", "silent_data_check",
        "nan_in_grad", "nan_detected", "traceback", "oom", "checkpoint_resume", "checkpoint_load",
        "data_reloop", "terminated_by_signal", "overflow", "loss_scale_min", "restart",
        "index_out_of_range", "device_error",
    ] = F("what the lines report (index_out_of_range: an embedding / gather index beyond its table, "
          "e.g. 'index out of range in self' or a CUDA srcIndex assert; device_error: a device-side "
          "assert or an illegal memory access)")
    count: Int = F("number of such lines", unit="count")
    step: Int | None = F("first iteration the lines name (or the step logged before them)", unit="steps")
    node: Optional[str] = F("host named by the lines (rerun machine, NaN check), when printed")
    message: Optional[str] = F("first such line (shortened), for evidence", match=False)
    signature: Optional[Literal["index_out_of_range", "device_assert", "illegal_memory_access", "non_finite"]] = F(
        "what the error line says, read from `message` when not given (an index beyond an embedding or "
        "gather table; a device-side assert; an illegal memory access; a NaN / Inf met by the code)")

    @model_validator(mode="before")
    @classmethod
    def _signature_from_message(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("signature") is None:
            sig = error_signature(str(data.get("message") or ""))
            if sig is None and data.get("kind") == "index_out_of_range":
                sig = "index_out_of_range"
            if sig is not None:
                data = {**data, "signature": sig}
        return data


# error lines whose words name the failure: an index beyond an embedding / gather table (torch on
# CPU, the CUDA indexSelect / cross-entropy asserts), a device-side assert, an illegal access
_SIGNATURES = (
    ("index_out_of_range", re.compile(
        r"index out of range in self|srcIndex < srcSelectDimSize|indexSelect(Large|Small)Index"
        r"|index -?\d+ is out of bounds for dimension|t >= 0 && t < n_classes|IndexKernel\.cu.*out of bounds")),
    ("illegal_memory_access", re.compile(r"illegal memory access", re.I)),
    ("non_finite", re.compile(
        r"contains either `?inf`?, `?nan`?|\b(loss|grad(ient)?s?( norm)?) (is|are|became|contains?) (nan|inf|non-?finite)"
        r"|\bnan (loss|gradients?) (detected|found)|non-?finite (loss|values?|gradients?)|found (nan|inf)\b", re.I)),
    ("device_assert", re.compile(r"device-side assert", re.I)),
)


def error_signature(message: str) -> str | None:
    for name, pattern in _SIGNATURES:
        if pattern.search(message):
            return name
    return None


@fact_type("lr_compare", collectors=_C, identity=("run", "against"))
class LrCompare(Fact):
    """The per-iteration settings a log prints besides the metrics (learning rate, global batch
    size, consumed samples/tokens, initial loss scale), of a target-side run against the reference
    on their common steps: a different schedule shows here even when no config file was found."""

    run: str = F("compared run")
    role: Role = F("role of the compared run")
    against: str = F("reference run name", default="baseline")
    steps_compared: Int = F("common steps where both logged a learning rate, before the first skipped "
                            "iteration of either run (a skipped step does not advance the scheduler, so "
                            "the printed lr lags from there on)", unit="count", default=0)
    target_first_lr: Num | None = F("compared run: learning rate at the first common step", unit="lr")
    against_first_lr: Num | None = F("reference: learning rate at the first common step", unit="lr", was="baseline_first_lr")
    target_peak_lr: Num | None = F("compared run: largest learning rate logged", unit="lr")
    against_peak_lr: Num | None = F("reference: largest learning rate logged", unit="lr", was="baseline_peak_lr")
    target_peak_step: Int | None = F("compared run: first step at its largest learning rate (end of "
                                     "warmup)", unit="steps")
    against_peak_step: Int | None = F("reference: first step at its largest learning rate", unit="steps", was="baseline_peak_step")
    max_rel_diff: Num | None = F("largest relative learning-rate difference at a common step", unit="ratio")
    mean_rel_diff: Num | None = F("mean relative learning-rate difference over common steps", unit="ratio")
    first_diff_step: Int | None = F("first common step whose learning rates differ by more than 0.1%",
                                    unit="steps")
    ratio_cv: Num | None = F("coefficient of variation of target lr / reference lr over common steps: "
                             "~0 with max_rel_diff > 0 means the base lr differs by a constant factor, "
                             "larger means the schedule (warmup, decay) differs", unit="ratio")
    schedule_differs: Bool = F("the learning rates differ by more than 0.1% at some common step",
                               default=False)
    target_global_batch: Num | None = F("compared run: global batch size logged (first value)", unit="samples")
    against_global_batch: Num | None = F("reference: global batch size logged (first value)", unit="samples", was="baseline_global_batch")
    global_batch_differs: Bool | None = F("the logged global batch sizes differ (None when one side does "
                                          "not print one)")
    target_tokens_per_sample: Num | None = F("compared run: consumed tokens / consumed samples (sequence "
                                             "length as trained)", unit="tokens")
    against_tokens_per_sample: Num | None = F("reference: consumed tokens / consumed samples", unit="tokens", was="baseline_tokens_per_sample")
    target_first_loss_scale: Num | None = F("compared run: first loss scale logged", unit="scale")
    against_first_loss_scale: Num | None = F("reference: first loss scale logged", unit="scale", was="baseline_first_loss_scale")


@fact_type("run_health", collectors=_C, identity=("run",))
class RunHealth(Fact):
    """One run's curve held against what a healthy run looks like, without any reference run:
    the initial loss against ln(vocabulary size), grad-norm explosions and non-finite grad norms,
    a loss stuck or at exactly zero, and whether the run stopped before its planned last step."""

    run: str = F("run name")
    role: Role = F("role of the run")
    first_step: Int | None = F("first logged step", unit="steps")
    first_loss: Num | None = F("loss at the first logged step", unit="loss")
    vocab_size: Int | None = F("vocabulary size the log prints (tokenizer vocab, else padded vocab, else "
                               "model config vocab_size)", unit="tokens")
    uniform_loss: Num | None = F("ln(vocab_size): the cross-entropy of a model that predicts every token "
                                 "with equal probability", unit="loss")
    first_loss_ratio: Num | None = F("first_loss / uniform_loss: ~1 for a model starting from random "
                                     "weights, well below 1 for a loaded checkpoint, above ~1.3 for "
                                     "broken initialisation, inputs or labels", unit="ratio")
    loads_checkpoint: Bool | None = F("the log shows weights loaded from a checkpoint (load path, "
                                      "'loading checkpoint'/'loading weights file' lines)")
    first_grad_norm: Num | None = F("grad norm at the first logged step (NaN if non-finite)", unit="norm")
    max_grad_norm: Num | None = F("largest finite grad norm logged", unit="norm")
    max_grad_norm_step: Int | None = F("step of that largest grad norm", unit="steps")
    median_grad_norm: Num | None = F("median finite grad norm", unit="norm")
    grad_norm_points: Int = F("logged points with a grad norm", unit="count", default=0)
    grad_norm_nonfinite: Int = F("logged points whose grad norm is NaN/Inf", unit="count", default=0)
    first_nonfinite_grad_step: Int | None = F("first step with a non-finite grad norm", unit="steps")
    loss_finite_at_first_bad_grad: Bool | None = F("the loss was still finite at first_nonfinite_grad_step "
                                                   "(the NaN entered in that step's backward, so the next "
                                                   "step's weights carry it)")
    first_nonfinite_loss_step: Int | None = F("first step whose loss is non-finite (printed NaN/Inf or a loss "
                                              "key the framework drops); HF Trainer filters NaN losses out "
                                              "of its log, so there it stays absent", unit="steps")
    first_nan_step: Int | None = F("first step with a non-finite loss or grad norm", unit="steps")
    nan_dump_step: Int | None = F("msprobe step number (0-based) of first_nan_step: the step to dump",
                                  unit="steps")
    loss_zero_points: Int = F("logged points whose loss is exactly 0.0", unit="count", default=0)
    loss_points: Int = F("logged points with a finite loss", unit="count", default=0)
    early_loss: Num | None = F("mean finite loss over the first quarter of logged points", unit="loss")
    late_loss: Num | None = F("mean finite loss over the last quarter of logged points", unit="loss")
    loss_rel_drop: Num | None = F("(early_loss - late_loss) / |early_loss|: how much the loss fell", unit="ratio")
    late_loss_cv: Num | None = F("coefficient of variation of the loss over the last quarter", unit="ratio")
    late_loss_ratio: Num | None = F("late_loss / uniform_loss (~1: the model still predicts uniformly)",
                                    unit="ratio")
    planned_steps: Int | None = F("last step the run was set up for (Megatron 'iteration N/TOTAL', the "
                                  "progress bar total)", unit="steps")
    last_step: Int | None = F("last logged step", unit="steps")
    stopped_early: Bool | None = F("the run logged its last step before planned_steps (crash, kill)")
