"""Fact types from msprobe (mindstudio-probe) artefacts: dumps and our own comparison of them,
msprobe's compare / first-diff / first-overflow outputs, the training monitor, config_check,
API pre-check and free-benchmark results.

Names: `api` is the full msprobe entry name (`Functional.gelu.0.forward`); `api_name` is the
name without call index and direction (`Functional.gelu`) -- the form users and rules use.
Relative errors are plain ratios (0.5 = 50 %), never percentages.
"""
from __future__ import annotations

from typing import Literal, Optional

from precdx.facts.base import Bool, F, Fact, Int, Num, fact_type
from precdx.vocabulary import Role

Family = Literal["matmul", "attention", "fused_attention", "softmax", "norm", "activation",
                 "embedding", "loss", "optimizer", "communication", "elementwise", "dropout",
                 "module", "other"]
Direction = Literal["forward", "backward", "parameters_grad"]
Label = Literal["error", "warning", "pass"]
Reason = Literal["output_error", "nonfinite", "dtype", "shape", "scalar_arg", "md5",
                 "requires_grad", "input_error"]

_FAMILY = "operator family of the API (matmul, attention, fused_attention, softmax, norm, " \
          "activation, embedding, loss, optimizer, communication, elementwise, dropout, module, other)"


@fact_type("dump_info", collectors=("msprobe",), identity=("role", "run", "step", "rank"))
class DumpInfo(Fact):
    """One msprobe dump (one step of one rank of one run) that was read."""

    role: Role = F("which side of the comparison the dump belongs to")
    run: str = F("run name (folder name, or group name for grouped runs)")
    step: Int = F("msprobe step counter of the dump (0-based; Megatron iteration = step + 1)", unit="steps")
    rank: Int = F("rank of the dump (proc<pid> dumps count as rank 0)")
    task: str = F("dump task: statistics, tensor, structure, diff_check, debug, ...")
    level: str = F("dump level: L0 (modules), L1 (APIs), mix (both), debug")
    summary_mode: Literal["statistics", "md5", "xor", "none"] = F(
        "what each tensor carries: statistics (Max/Min/Mean/Norm), md5 (CRC-32 plus statistics), "
        "xor (64-bit checksum only), none (structure-only dump)")
    framework: str = F("framework recorded in dump.json (pytorch, mindspore) or inferred from dtypes")
    api_count: Int = F("number of API entries (forward and backward)", unit="count")
    module_count: Int = F("number of module entries (forward, backward, parameters_grad)", unit="count")
    nonfinite_count: Int = F("entries with a NaN/Inf statistic in some input or output (legal -inf of "
                             "masks not counted)", unit="count")
    has_stack: Bool = F("stack.json was found beside dump.json")
    has_construct: Bool = F("construct.json with a module tree was found beside dump.json")
    complete: Bool = F("dump.json parsed to its end (False: truncated or damaged; results are partial)")


@fact_type("first_divergence", collectors=("msprobe",),
           identity=("run", "against", "step", "rank", "method"))
class FirstDivergence(Fact):
    """The first API, in execution order, whose data departs from the other run's dump."""

    run: str = F("run whose dump is examined (normally the target)")
    role: Role = F("role of that run", default="target")
    against: str = F("run it is compared with (normally the baseline)", default="baseline")
    against_role: Role = F("role of the run it is compared with", default="baseline")
    step: Int = F("msprobe step of the compared dumps", unit="steps")
    rank: Int = F("rank of the compared dumps")
    method: Literal["ours", "msprobe_compare", "diff_analyze", "monitor"] = F(
        "who found it: our own dump comparison, msprobe's compare CSV, msprobe's -da json, or the "
        "training monitor's per-step module statistics compared like a module-level dump")
    api: str = F("full msprobe entry name, e.g. Functional.gelu.0.forward")
    api_name: str = F("API name without call index and direction, e.g. Functional.gelu")
    family: Family = F(_FAMILY)
    direction: Direction = F("forward or backward pass (parameters_grad for module weight grads)")
    kind: Literal["introduced", "propagated", "wiring", "weights", "data_input", "unknown"] = F(
        "introduced: inputs match and the output differs (the operator itself); propagated: inputs "
        "already differ because an upstream operator differed; wiring: an input differs although the "
        "operator producing it matched (a different tensor is fed in); weights: a parameter differs "
        "while the activations match; data_input: the model's input tokens/data already differ; "
        "unknown: the source (msprobe CSV) does not say")
    reason: Optional[Reason] = F(
        "what differs: output_error (statistics), nonfinite (NaN/Inf only on this side), dtype, "
        "shape, scalar_arg (a non-tensor argument such as eps), md5, requires_grad, input_error")
    dtype: Optional[str] = F("dtype of the first output (or input) tensor on this run, e.g. torch.bfloat16")
    dtype_against: Optional[str] = F("dtype of the same tensor on the other run")
    module: Optional[str] = F("module path of the API from construct.json, e.g. decoder.layers.0.mlp", match=False)
    code_line: Optional[str] = F("user code line that called the API (from stack.json)", match=False)
    input_rel_err: Num | None = F("largest relative error over the API's inputs", unit="ratio")
    output_rel_err: Num | None = F("largest relative error over the API's outputs", unit="ratio")
    order_index: Int | None = F("position of the API in the dump's execution order (0-based)", unit="count")
    label: Label = F("verdict comparable to msprobe's Result column (error or warning)")
    matched_by: Literal["name", "fallback", "msprobe"] = F(
        "how the API was paired: exact name (name + call order + shapes), fallback (same API "
        "name and shapes at a shifted call index), or msprobe's own pairing", default="name")
    after_loss: Bool | None = F(
        "the difference enters after the loss was computed: a forward API downstream of the loss "
        "function (its reduction or scaling), or the first backward entry, whose incoming gradient "
        "(the loss's) differs while every forward entry matched")


@fact_type("dump_step_compare", collectors=("msprobe",), identity=("run", "against", "step", "rank"))
class DumpStepCompare(Fact):
    """Summary of comparing one step/rank dump of a run with the other run's dump of that step."""

    run: str = F("run whose dump is examined")
    role: Role = F("role of that run")
    against: str = F("run it is compared with")
    against_role: Role = F("role of the run it is compared with")
    step: Int = F("msprobe step", unit="steps")
    rank: Int = F("rank")
    mode: Literal["statistics", "md5", "exact"] = F(
        "comparison mode: statistics (tolerances for different devices), md5 (checksum equality), "
        "exact (statistics must be bit-equal: a run against its own rerun)")
    all_match: Bool = F("every paired API matches within the mode's tolerance and nothing is unmatched")
    n_compared: Int = F("APIs paired and compared", unit="count")
    n_error: Int = F("APIs labelled error", unit="count")
    n_warning: Int = F("APIs labelled warning", unit="count")
    n_diverged: Int = F("APIs whose outputs depart beyond the divergence tolerance", unit="count")
    n_unmatched: Int = F("APIs present on one side only (after fallback pairing)", unit="count")
    n_fallback: Int = F("APIs paired only by the fallback (shifted call index)", unit="count")
    max_output_rel_err: Num | None = F("largest output relative error over all paired APIs", unit="ratio")


@fact_type("first_nan", collectors=("msprobe",), identity=("run", "step", "rank", "method"))
class FirstNan(Fact):
    """Where the first Inf/NaN appears in one rank's dump of one step, and how it got there."""

    run: str = F("run whose dump holds the Inf/NaN")
    role: Role = F("role of that run")
    step: Int = F("msprobe step", unit="steps")
    rank: Int = F("rank of this dump")
    method: Literal["ours", "overflow_check", "msprobe_compare", "monitor"] = F(
        "who located it: our scan of the dump, msprobe overflow_check's anomaly_analyze json, "
        "our scan of the target rows of an msprobe compare result, or our scan of the training "
        "monitor's per-step module statistics")
    api: str = F("full msprobe entry name of the first API with an Inf/NaN")
    api_name: str = F("API name without call index and direction")
    family: Family = F(_FAMILY)
    direction: Direction = F("forward or backward")
    kind: Literal["operator_output", "weight", "input", "communication", "unknown"] = F(
        "operator_output: produced by this operator from finite inputs; weight: already in a parameter "
        "(the previous step's backward/update made it); input: arrives at an input from an operator the "
        "dump did not capture; communication: a communication operator turns finite into non-finite "
        "(the data came from another rank)")
    value: Literal["nan", "inf", "mixed"] | None = F("what the non-finite statistics are")
    module: Optional[str] = F("module path from construct.json", match=False)
    code_line: Optional[str] = F("user code line from stack.json", match=False)
    order_index: Int | None = F("position in the dump's execution order", unit="count")
    baseline_finite: Bool | None = F("the same API is finite in the baseline dump of the same step/rank")
    origin_rank: Int | None = F("rank where the Inf/NaN starts, judged across all ranks of the step")
    is_origin_rank: Bool | None = F("this rank is where the Inf/NaN starts")


@fact_type("nondeterministic_api", collectors=("msprobe",), identity=("run", "against", "step", "rank"))
class NondeterministicApi(Fact):
    """First API whose output differs between a run and its rerun (same side, same inputs expected)."""

    run: str = F("the rerun (or run) examined")
    role: Role = F("role of that run")
    against: str = F("the run it should reproduce")
    against_role: Role = F("role of that run")
    step: Int = F("msprobe step", unit="steps")
    rank: Int = F("rank")
    mode: Literal["md5", "exact"] = F("md5: checksums compared; exact: statistics must be bit-equal")
    api: str = F("full msprobe entry name")
    api_name: str = F("API name without call index and direction")
    family: Family = F(_FAMILY)
    direction: Direction = F("forward or backward")
    kind: Literal["nondeterministic_op", "input_differs", "nonfinite_differs"] = F(
        "nondeterministic_op: identical inputs, different output (the operator is not reproducible); "
        "input_differs: the first difference is already in an input (data, weights or an operator the "
        "dump did not capture); nonfinite_differs: identical inputs, but the output is Inf/NaN in one "
        "run only (not rounding order: memory overwritten or a hardware fault)")
    module: Optional[str] = F("module path from construct.json", match=False)
    code_line: Optional[str] = F("user code line from stack.json", match=False)
    order_index: Int | None = F("position in the dump's execution order", unit="count")
    output_rel_err: Num | None = F("largest relative difference over the API's outputs between the two "
                                   "launches (a rounding order: ~1e-6; other random numbers: ~1)",
                                   unit="ratio")


@fact_type("dump_structure_diff", collectors=("msprobe",),
           identity=("run", "against", "step", "rank", "name", "side"))
class DumpStructureDiff(Fact):
    """An API or module that occurs in one dump only (or more often in one than in the other)."""

    run: str = F("run examined")
    against: str = F("run compared with")
    step: Int = F("msprobe step", unit="steps")
    rank: Int = F("rank")
    kind: Literal["api", "module"] = F("whether the name is an API or a module")
    name: str = F("API name (Torch.relu) or module path with class (decoder.layers.0.mlp.MLP)")
    side: Literal["run_only", "against_only"] = F("which dump has the extra calls")
    count: Int = F("number of extra calls (forward and backward entries)", unit="count")


@fact_type("dump_structure_summary", collectors=("msprobe",), identity=("run", "against", "step", "rank"))
class DumpStructureSummary(Fact):
    """Whether two dumps of the same step have the same APIs and modules."""

    run: str = F("run examined")
    against: str = F("run compared with")
    step: Int = F("msprobe step", unit="steps")
    rank: Int = F("rank")
    same_structure: Bool = F("both dumps call the same APIs and modules the same number of times")
    n_run_only: Int = F("distinct API/module names with extra calls in the run", unit="count")
    n_against_only: Int = F("distinct API/module names with extra calls in the other run", unit="count")
    names: Optional[str] = F("comma-separated names with extra calls (side-prefixed)", match=False)


@fact_type("compare_result_summary", collectors=("msprobe",), identity=("run", "step", "rank", "file"))
class CompareResultSummary(Fact):
    """Counts from one msprobe `compare_result_*.csv/.xlsx` (msprobe's own comparison)."""

    run: str = F("run in whose folder the result was found (the compare target, -tp)")
    role: Role = F("role of that run")
    step: Int | None = F("msprobe step, when the folder or file name says", unit="steps")
    rank: Int | None = F("rank from the file name (compare_result_rank<N>_...)")
    file: str = F("file name", match=False)
    mode: Literal["statistics", "md5", "tensor", "legacy"] = F(
        "comparison mode deduced from the columns (legacy = 2023 ptdbg_ascend layout)")
    n_rows: Int = F("tensor rows", unit="count")
    n_apis: Int = F("distinct APIs", unit="count")
    n_error: Int = F("APIs with at least one error row", unit="count")
    n_warning: Int = F("APIs with a warning row and no error row", unit="count")
    n_unmatched: Int = F("rows without a bench counterpart (Bench Name N/A)", unit="count")
    n_nonfinite: Int = F("rows whose target statistics hold NaN/Inf", unit="count")
    first_error_api: Optional[str] = F("first API (in file order) labelled error", match=False)


@fact_type("grad_monitor_compare", collectors=("msprobe",), identity=("run", "against", "metric"))
class GradMonitorCompare(Fact):
    """Per-parameter gradient statistics of two runs (msprobe monitor CSVs) compared step by step."""

    run: str = F("run examined (normally the target)")
    against: str = F("run compared with (normally the baseline)")
    metric: str = F("monitor table compared, e.g. grad_reduced.norm")
    n_params: Int = F("parameters present in both runs", unit="count")
    n_steps: Int = F("steps present in both runs", unit="count")
    departs: Bool = F("some parameter departs from the baseline by more than the tolerance")
    first_step: Int | None = F("first step where a parameter departs", unit="steps")
    param: Optional[str] = F("the parameter that departs most from the common trend at that step")
    param_family: Literal["embedding", "attention", "mlp", "norm", "output", "other"] | None = F(
        "what kind of parameter it is")
    ratio: Num | None = F("run / baseline value of that parameter at the first departing step", unit="ratio")
    max_ratio: Num | None = F("largest run / baseline ratio of that parameter over all steps", unit="ratio")
    common_mode: Bool | None = F("most parameters depart together at that step (a global scale such as "
                                 "clipping or loss scale), rather than one parameter alone")
    late_growth: Bool | None = F("that parameter's value on the run grows late in training (last quarter "
                                 "mean over first quarter mean > 1.5) while the baseline's does not")
    nonfinite_step: Int | None = F("first step where the run has a NaN/Inf in this table", unit="steps")


@fact_type("monitor_anomaly", collectors=("msprobe",), identity=("run", "rank", "tag", "step"))
class MonitorAnomaly(Fact):
    """An alert written by the msprobe training monitor (anomaly.json / anomaly_analyse.json)."""

    run: str = F("run whose monitor wrote it")
    role: Role = F("role of that run")
    rank: Int = F("rank")
    step: Int = F("step of the alert", unit="steps")
    rule: str = F("alert rule, e.g. AnomalyNan, AnomalyTurbulence")
    tag: str = F("monitored tensor, e.g. 0:block.mlp.fc1.output:0/rank0/actv")
    target: str = F("tensor name inside the tag, e.g. block.mlp.fc1.output")
    table: str = F("monitor table: actv, actv_grad, grad_reduced, grad_unreduced, ...")
    value: Num | None = F("value that triggered the alert")
    benign: Bool = F("a known false alarm: gradient of a model input without gradient (token ids)")
    module: str = F("module (or owner of the parameter) the tensor belongs to, e.g. block.mlp.fc1",
                    default="")
    category: Literal["activation", "activation_grad", "gradient", "optimizer_state", "parameter", "other"] = F(
        "what is monitored: activation (module input/output), activation_grad, gradient (weight "
        "gradients, reduced or not), optimizer_state (exp_avg, exp_avg_sq), parameter", default="other")
    call: Int | None = F("order of the monitored call within the step (from the alert's key)", unit="count")
    first: Bool = F("the run's earliest alert that is not a known false alarm (lowest step, then call "
                    "order; per rank)", default=False)


@fact_type("config_check_result", collectors=("msprobe",), identity=("run", "section", "item"))
class ConfigCheckResult(Fact):
    """One line of an msprobe config_check comparison (result.xlsx) or checkpoint similarity."""

    run: str = F("run in whose folder the result was found")
    section: str = F("sheet: summary, env, pip, dataset, weights, hyperparameters, random, checkpoint")
    item: str = F("what the line is about (sheet name for summary, else parameter/package/variable)")
    level: Label = F("pass, warning or error as written by msprobe (checkpoint: error when cos < 0.99)")
    bench_value: Optional[str] = F("value on the benchmark side", match=False)
    cmp_value: Optional[str] = F("value on the compared side", match=False)


@fact_type("api_precheck", collectors=("msprobe",), identity=("run", "api"))
class ApiPrecheck(Fact):
    """One API's result in msprobe API pre-check (acc_check / run_ut / api_precision_compare)."""

    run: str = F("run in whose folder the result was found")
    api: str = F("API as written by the tool, e.g. Functional.gelu.0")
    api_name: str = F("API name without call index")
    family: Family = F(_FAMILY)
    forward: Literal["pass", "warning", "error", "skip", "unknown"] = F("forward test result")
    backward: Literal["pass", "warning", "error", "skip", "unknown"] = F("backward test result")
    failed: Bool = F("forward or backward is error")
    message: Optional[str] = F("tool message", match=False)


@fact_type("free_benchmark_hit", collectors=("msprobe",), identity=("run", "rank", "step", "api", "stage"))
class FreeBenchmarkHit(Fact):
    """An API flagged by msprobe free-benchmark (perturbed re-execution changes the output too much)."""

    run: str = F("run in whose folder the result was found")
    rank: Int = F("rank")
    step: Int = F("step", unit="steps")
    api: str = F("API name as written by the tool")
    api_name: str = F("API name without call index and direction")
    family: Family = F(_FAMILY)
    stage: str = F("forward or backward")
    pert_mode: str = F("perturbation: improve_precision, add_noise, bit_noise, change_value, to_cpu, ...")
    max_rel: Num | None = F("largest relative error after perturbation", unit="ratio")
    threshold: Num | None = F("threshold for the dtype (fp16 0.002, bf16 0.004, fp32 0.0002)", unit="ratio")
    exceeds: Bool = F("max_rel is above the dtype's threshold")
