"""Checklist facts: what the launch configs, environments, installed libraries, model
structure listings and evaluation files of the compared runs say, and where they differ.

Pairwise facts name the pair as "<run>~<reference run>" (e.g. "target~baseline",
"target_rerun~target", "target/group03~target/group00"). In them the field `baseline` always
holds the reference side (right of "~") and `target` the compared side (left of "~"), whatever
the roles; `role`/`against_role` give the roles so rules need not parse the pair string
(`against_role` was `ref_role` before schema 2 and is still accepted under that name).
"""
from __future__ import annotations

from typing import Literal, Optional

from precdx.facts.base import Bool, F, Fact, Int, Num, fact_type
from precdx.vocabulary import Role, RunDevice


ConfigCategory = Literal["hyperparameter", "parallel", "precision", "framework_option",
                         "determinism", "data", "model", "logging", "device", "other"]

UNSET = "<unset>"

_PAIR = "which runs are compared, '<run>~<reference run>', e.g. target~baseline"
_ROLE = "role of the compared run (left of ~)"
_REF_ROLE = "role of the reference run (right of ~)"
_REF = "value on the reference side (right of ~); '<unset>' when that side does not set it"
_CMP = "value on the compared side (left of ~); '<unset>' when that side does not set it"


@fact_type("config_diff", collectors=("checklist",), identity=("pair", "name"))
class ConfigDiff(Fact):
    """A training setting (launch script argument, YAML/JSON/TOML config key) whose effective
    value differs between two runs, after alias mapping (learning_rate -> lr, ...) and
    normalisation (3e-4 == 0.0003, a bare --flag == true)."""

    pair: str = F(_PAIR)
    role: Role = F(_ROLE)
    against_role: Role = F(_REF_ROLE, was="ref_role")
    name: str = F("canonical Megatron-style argument name (argparse dest), e.g. lr, micro_batch_size, "
                 "overlap_param_gather; unknown keys keep their normalised (dotted) name")
    category: ConfigCategory = F("what the setting governs; logging and device keys are listed but "
                                 "are not causes of a loss mismatch")
    baseline: str = F(_REF)
    target: str = F(_CMP)
    presence: Literal["both", "baseline_only", "target_only"] = F(
        "which sides set the key explicitly (baseline_only = only the reference side)")
    rel_change: Num | None = F("(target - baseline) / |baseline| when both values are numeric; "
                               "inf when the reference value is 0", unit="ratio")
    relevant: Bool = F("the difference can change training numerics: false for logging and "
                       "device-only keys, for paths that differ only in their directory, and for "
                       "keys set on one side only when the two runs use different frameworks")
    path_only: Bool = F("both values are paths with the same final component (same file or "
                        "dataset at another mount point)", default=False)
    same_framework: Bool = F("both runs were launched with the same training framework (when "
                             "false, one-sided keys often only reflect different argument sets)",
                             default=True)
    default_side: Optional[Literal["baseline", "target"]] = F(
        "the side that leaves the key unset, when its framework's default is known (its value then "
        "reads '<value> (default)'); absent when both sides set it or no default is known")
    from_log: Bool = F("every value compared comes from the runs' training logs (argument dumps and "
                       "config echoes), not from launch scripts or config files", default=False)
    baseline_name: Optional[str] = F("the key as written on the reference side", match=False)
    target_name: Optional[str] = F("the key as written on the compared side", match=False)


@fact_type("config_summary", collectors=("checklist",), identity=("pair",))
class ConfigSummary(Fact):
    """All relevant configuration differences of one pair of runs taken together, so a rule can
    tell "a few settings differ" (each worth flipping alone) from "the configs are unrelated"."""

    pair: str = F(_PAIR)
    role: Role = F(_ROLE)
    against_role: Role = F(_REF_ROLE, was="ref_role")
    n_relevant: Int = F("config_diff facts of this pair with relevant=true", unit="count")
    n_categories: Int = F("distinct categories among them", unit="count")
    only_category: Optional[ConfigCategory] = F("the category when every relevant difference has the same one")
    n_other: Int = F("relevant differences of keys precdx does not know (category other)", unit="count",
                     default=0)
    names: Optional[str] = F("the differing settings, comma-joined (at most 12)", match=False)
    flips: Optional[str] = F("'name: baseline -> target' for each, semicolon-joined (at most 12)",
                             match=False)
    from_log: Bool = F("every difference was read from the runs' training logs", default=False)


@fact_type("config_value", collectors=("checklist",), identity=("role", "run", "name"))
class ConfigValue(Fact):
    """The effective value of one recognised training setting in one run, so rules can test
    absolute settings (fp16 on, overlap_param_gather on, seed, dropout, ...)."""

    role: Role = F("role of the run")
    run: str = F("run name, e.g. target or target/group00")
    name: str = F("canonical Megatron-style argument name (see config_diff.name)")
    category: ConfigCategory = F("what the setting governs")
    value: str = F("normalised value as text: numbers as written, flags 'true'/'false', lists "
                   "comma-joined, '<random>' for a shell $RANDOM, '<unset>' never appears here")
    number: Num | None = F("the value as a number when it is numeric")
    flag: Bool | None = F("the value as a boolean when it is a flag or true/false")
    explicit: Bool = F("set in a script or config file (false: derived, e.g. global batch from "
                       "micro batch x accumulation x data-parallel size)", default=True)
    framework: str = F("training framework the run was launched with (megatron, mindspeed, "
                       "megatron_deepspeed, hf_trainer, torchtitan, deepspeed, unknown)",
                       default="unknown")
    raw_name: Optional[str] = F("the key as written in the file", match=False)


EnvCategory = Literal["determinism", "numerics", "synchronisation", "communication", "memory",
                      "device", "other"]


@fact_type("env_switch", collectors=("checklist",), identity=("role", "run", "name"))
class EnvSwitch(Fact):
    """One determinism or numerics environment switch in one run (emitted whether set or not,
    so rules can test for a missing switch). GPU spellings are mapped to the NPU name
    (NCCL_DETERMINISTIC -> HCCL_DETERMINISTIC, CUDA_LAUNCH_BLOCKING -> ASCEND_LAUNCH_BLOCKING)."""

    role: Role = F("role of the run")
    run: str = F("run name, e.g. target or target/group00")
    name: str = F("canonical (NPU-side) variable name, e.g. HCCL_DETERMINISTIC, INF_NAN_MODE_ENABLE; "
                  "GPU-only switches keep their own name (CUBLAS_WORKSPACE_CONFIG)")
    category: EnvCategory = F("what the switch governs")
    device: RunDevice = F("device the run used")
    applies: Bool = F("the switch (or its equivalent) exists on this run's device")
    is_set: Bool = F("the variable (or its device equivalent) is set in the env listing or "
                     "exported by the launch script")
    value: Optional[str] = F("its value when set")
    enabled: Bool | None = F("the switch's feature is effectively on (e.g. INF_NAN_MODE_ENABLE=1, "
                             "ATB_LLM_LCOC_ENABLE=1), using the documented default when unset; "
                             "None when unset with a device-dependent default, or not a boolean "
                             "switch")
    deterministic_setting: Bool | None = F("the value is the reproducible/deterministic choice "
                                           "recommended for accuracy comparison; None when "
                                           "the switch has no such choice")
    raw_name: Optional[str] = F("the variable actually read (e.g. NCCL_DETERMINISTIC on a GPU run)",
                             match=False)


@fact_type("env_diff", collectors=("checklist",), identity=("pair", "name"))
class EnvDiff(Fact):
    """A determinism/numerics environment switch whose effective state differs between two
    runs after mapping device equivalents (HCCL<->NCCL, ASCEND_LAUNCH_BLOCKING<->
    CUDA_LAUNCH_BLOCKING, ASCEND_RT_VISIBLE_DEVICES<->CUDA_VISIBLE_DEVICES). On a cross-device
    pair, switches that exist on one device only (CLOSE_MATMUL_K_SHIFT, CUBLAS_WORKSPACE_CONFIG,
    INF_NAN_MODE_ENABLE) are not compared: use env_switch for their absolute state."""

    pair: str = F(_PAIR)
    role: Role = F(_ROLE)
    against_role: Role = F(_REF_ROLE, was="ref_role")
    name: str = F("canonical (NPU-side) variable name, see env_switch.name")
    category: EnvCategory = F("what the switch governs")
    baseline: str = F(_REF)
    target: str = F(_CMP)
    baseline_name: Optional[str] = F("variable read on the reference side", match=False)
    target_name: Optional[str] = F("variable read on the compared side", match=False)


@fact_type("library_diff", collectors=("checklist",), identity=("pair", "package"))
class LibraryDiff(Fact):
    """A Python package whose version differs (or that is installed on one side only) between
    two runs' `pip freeze` / `pip list`; device packages on a cross-device pair are expected
    and not reported."""

    pair: str = F(_PAIR)
    role: Role = F(_ROLE)
    against_role: Role = F(_REF_ROLE, was="ref_role")
    package: str = F("normalised distribution name (lower case, '-' separators), e.g. torch, "
                     "megatron-core, torch-npu")
    baseline: str = F(_REF + " (version without local suffix such as +cu121)")
    target: str = F(_CMP + " (version without local suffix)")
    key_library: Bool = F("a library known to affect training numerics or data (torch, transformers, "
                  "tokenizers, megatron, deepspeed, ...)")
    category: Literal["framework", "data", "numerics", "device", "other"] = F(
        "what the library provides")
    baseline_raw: Optional[str] = F("version or install reference as listed", match=False)
    target_raw: Optional[str] = F("version or install reference as listed", match=False)


@fact_type("library_version", collectors=("checklist",), identity=("role", "run", "package"))
class LibraryVersion(Fact):
    """The installed version of a key library (or device stack package) in one run."""

    role: Role = F("role of the run")
    run: str = F("run name")
    package: str = F("normalised distribution name, e.g. torch, torch-npu, transformers")
    version: str = F("version without local suffix ('git:<ref>' for VCS installs)")
    category: Literal["framework", "data", "numerics", "device", "other"] = F(
        "what the library provides")
    raw: Optional[str] = F("version or install reference as listed", match=False)


@fact_type("eval_gap", collectors=("checklist",), identity=("pair", "metric"))
class EvalGap(Fact):
    """A downstream evaluation metric of two runs (from eval.json-style files)."""

    pair: str = F(_PAIR)
    role: Role = F(_ROLE)
    against_role: Role = F(_REF_ROLE, was="ref_role")
    metric: str = F("metric name, e.g. eval_loss, eval_accuracy, perplexity, "
                    "or '<task>.<metric>' for per-task results")
    baseline: Num = F("metric on the reference side")
    target: Num = F("metric on the compared side")
    abs_gap: Num = F("target - baseline", unit="abs")
    rel_gap: Num = F("(target - baseline) / |baseline|; inf when the reference is 0 and the "
                     "values differ", unit="ratio")
    higher_is_better: Bool | None = F("direction of the metric; None when unknown")
    target_worse: Bool | None = F("the compared side is worse (direction-aware); None when the "
                                  "direction is unknown")


@fact_type("structure_diff", collectors=("checklist",), identity=("pair", "item"))
class StructureDiff(Fact):
    """A module or parameter that differs between two runs' model listings (printed model,
    parameter name/shape listing, or model config file)."""

    pair: str = F(_PAIR)
    role: Role = F(_ROLE)
    against_role: Role = F(_REF_ROLE, was="ref_role")
    item: str = F("module path (e.g. decoder.layers.0.mlp) or parameter name "
                  "(e.g. decoder.layers.0.mlp.linear_fc1.weight)")
    kind: Literal["module", "parameter"] = F("whether item is a module or a parameter")
    change: Literal["only_baseline", "only_target", "type", "shape", "args"] = F(
        "how it differs: present on one side only, other module type, other parameter shape, "
        "other module arguments")
    baseline: str = F(_REF + " (module type and arguments, or shape)")
    target: str = F(_CMP + " (module type and arguments, or shape)")


@fact_type("structure_summary", collectors=("checklist",), identity=("role", "run", "listing"))
class StructureSummary(Fact):
    """Size of one run's model listing, so rules can tell whether structures could be compared."""

    role: Role = F("role of the run")
    run: str = F("run name")
    listing: Literal["printed_model", "parameters"] = F("which kind of listing was read")
    modules: Int = F("number of modules (printed model) or parameters (parameter listing)",
                     unit="count")
    elements: Int | None = F("total number of parameter elements (parameter listing only)",
                             unit="count")


@fact_type("determinism_status", collectors=("checklist",), identity=("role", "run"))
class DeterminismStatus(Fact):
    """Whether one run was set up to be reproducible: seeds, deterministic algorithms,
    deterministic communication and matmul order, dropout."""

    role: Role = F("role of the run")
    run: str = F("run name")
    seed: Optional[str] = F("seed value as configured ('<random>' when drawn from $RANDOM); None when "
                         "not set explicitly (framework default applies)")
    seed_fixed: Bool = F("the seed is a fixed number (explicit, or the framework's fixed default)")
    deterministic_algorithms: Bool = F("deterministic operator algorithms requested "
                                       "(--deterministic-mode, --use-deter-comp, --npu-deterministic, "
                                       "full_determinism, torch.use_deterministic_algorithms)")
    comm_deterministic: Bool = F("deterministic collective reduction: HCCL_DETERMINISTIC on (NPU); "
                                 "on GPU NCCL_ALGO pinned or NCCL_DETERMINISTIC on")
    matmul_deterministic: Bool = F("matmul accumulation order fixed: CLOSE_MATMUL_K_SHIFT=1 (NPU) "
                                   "or CUBLAS_WORKSPACE_CONFIG set (GPU)")
    dropout_off: Bool | None = F("every dropout probability is 0; None when the config gives no "
                                 "dropout setting and the framework default is unknown")
    fully_deterministic: Bool = F("all of the above hold (dropout unknown counts as not off)")
