"""Numerics-relevant defaults of each training framework, with the version where a default changed:
what a run uses for a setting its launch script, config files and log leave unset.

Read from the frameworks' own argument parsers and config classes:
  megatron     megatron/training/arguments.py, core TransformerConfig / OptimizerConfig,
               training/config (Megatron-LM d98e8a64); MindSpeed is Megatron with an NPU adaptor
  hf_trainer   transformers TrainingArguments (src/transformers/training_args.py)
  deepspeed    deepspeed/runtime/constants.py and config.py
  torchtitan   torchtitan/config/job_config.py
Model-architecture defaults of Hugging Face models (dropout, init range, norm eps, rope theta)
belong to each model's config class, not to the Trainer, so they are not listed for hf_trainer:
a run's model config (config.json or the `Model config ... {` echo) gives them explicitly.

`lookup` answers with the value for a framework and (when known) its version; when a default
changed and the version is unknown, every candidate value is returned so the caller can tell
whether the comparison depends on the version.
"""
from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Default:
    value: str                              # normalised text, as RunConfig stores settings
    since: tuple[tuple[str, str], ...] = ()  # (first version, value from that version on), ascending
    package: str | None = None              # distribution whose version decides (pip name)
    note: str = ""

    def candidates(self) -> set[str]:
        return {self.value, *(v for _, v in self.since)}

    def at(self, version: str | None) -> str | None:
        """The default at `version`; None when it changed and the version is unknown."""
        if not self.since:
            return self.value
        if version is None:
            return None
        v = version_key(version)
        if v is None:
            return None
        out = self.value
        for first, value in self.since:
            if v >= version_key(first):  # type: ignore[operator]
                out = value
        return out


def _d(value: str, *since: tuple[str, str], package: str | None = None, note: str = "") -> Default:
    return Default(value, tuple(since), package, note)


_MEGATRON: dict[str, Default] = {
    "hidden_dropout": _d("0.1"),
    "attention_dropout": _d("0.1"),
    "init_method_std": _d("0.02"),
    "norm_epsilon": _d("1e-05"),
    "rotary_base": _d("10000"),
    "weight_decay": _d("0.01"),
    "clip_grad": _d("1.0"),
    "adam_beta1": _d("0.9"),
    "adam_beta2": _d("0.999"),
    "adam_eps": _d("1e-08"),
    "sgd_momentum": _d("0.9"),
    "optimizer": _d("adam"),
    "lr_decay_style": _d("linear"),
    "min_lr": _d("0.0"),
    "lr_warmup_init": _d("0.0"),
    "seed": _d("1234"),
    "normalization": _d("LayerNorm"),
    "position_embedding_type": _d("learned_absolute"),
    "add_bias_linear": _d("true"),
    "add_qkv_bias": _d("false"),
    "swiglu": _d("false"),
    "untie_embeddings_and_output_weights": _d("false", note="embeddings and output layer tied"),
    "apply_residual_connection_post_layernorm": _d("false"),
    "make_vocab_size_divisible_by": _d("128"),
    "attention_softmax_in_fp32": _d("false"),
    "apply_query_key_layer_scaling": _d("true", ("0.4.0", "false"), package="megatron-core",
                                        note="--no-query-key-layer-scaling became --apply-query-key-layer-scaling"),
    "accumulate_allreduce_grads_in_fp32": _d("false"),
    "fp32_residual_connection": _d("false"),
    "calculate_per_token_loss": _d("false"),
    "fp16": _d("false"),
    "bf16": _d("false"),
    "initial_loss_scale": _d("4294967296"),
    "min_loss_scale": _d("1.0"),
    "loss_scale_window": _d("1000"),
    "hysteresis": _d("2"),
    "deterministic_mode": _d("false"),
    "overlap_grad_reduce": _d("false"),
    "overlap_param_gather": _d("false"),
    "use_distributed_optimizer": _d("false"),
    "sequence_parallel": _d("false"),
    "tensor_model_parallel_size": _d("1"),
    "pipeline_model_parallel_size": _d("1"),
    "context_parallel_size": _d("1"),
    "expert_model_parallel_size": _d("1"),
    "eod_mask_loss": _d("false"),
    "reset_position_ids": _d("false"),
    "reset_attention_mask": _d("false"),
}

_HF_TRAINER: dict[str, Default] = {
    "lr": _d("5e-05"),
    "lr_decay_style": _d("linear"),
    "lr_warmup_iters": _d("0"),
    "lr_warmup_fraction": _d("0.0"),
    "weight_decay": _d("0.0"),
    "adam_beta1": _d("0.9"),
    "adam_beta2": _d("0.999"),
    "adam_eps": _d("1e-08"),
    "clip_grad": _d("1.0"),
    "label_smoothing": _d("0.0"),
    "gradient_accumulation_steps": _d("1"),
    "micro_batch_size": _d("8"),
    "train_epochs": _d("3.0"),
    "seed": _d("42"),
    "fp16": _d("false"),
    "bf16": _d("false"),
    "deterministic_mode": _d("false"),
    "fsdp": _d("false", note="no FSDP unless --fsdp is given"),
    "zero_stage": _d("0", note="no DeepSpeed unless --deepspeed is given"),
    "loss_reduction": _d("false", ("4.54.0", "true"), package="transformers",
                         note="average_tokens_across_devices"),
}

_DEEPSPEED: dict[str, Default] = {
    "clip_grad": _d("0.0", ("0.19.3", "1.0"), package="deepspeed",
                    note="gradient_clipping: off before 0.19.3"),
    "fp16": _d("false"),
    "bf16": _d("false"),
    "zero_stage": _d("0"),
    "initial_loss_scale": _d("65536.0", note="2 ** initial_scale_power (16)"),
    "loss_scale_window": _d("1000"),
    "hysteresis": _d("2"),
    "min_loss_scale": _d("1"),
    "gradient_accumulation_steps": _d("1"),
}

_TORCHTITAN: dict[str, Default] = {
    "lr": _d("0.0008"),
    "adam_beta1": _d("0.9"),
    "adam_beta2": _d("0.95"),
    "adam_eps": _d("1e-08"),
    "weight_decay": _d("0.1"),
    "clip_grad": _d("1.0"),
    "seed": _d("<random>", note="no seed unless debug.seed is set"),
    "deterministic_mode": _d("false"),
    "params_dtype": _d("bfloat16", note="FSDP mixed_precision_param"),
    "mixed_precision_reduce": _d("float32"),
}

TABLE: dict[str, dict[str, Default]] = {
    "megatron": _MEGATRON,
    "mindspeed": _MEGATRON,
    "megatron_deepspeed": {**_MEGATRON, **{k: v for k, v in _DEEPSPEED.items()
                                           if k in ("zero_stage",)}},
    "hf_trainer": _HF_TRAINER,
    "deepspeed": _DEEPSPEED,
    "torchtitan": _TORCHTITAN,
}
# Frameworks whose version decides a changed default: framework -> pip name of that framework.
FRAMEWORK_PACKAGE = {"megatron": "megatron-core", "mindspeed": "megatron-core",
                     "megatron_deepspeed": "megatron-core", "hf_trainer": "transformers",
                     "deepspeed": "deepspeed", "torchtitan": "torchtitan"}


def version_key(version: str) -> tuple[int, ...] | None:
    """'0.19.3' -> (0, 19, 3); '4.54.0.dev0' -> (4, 54, 0); None when no leading number."""
    m = re.match(r"v?(\d+(?:\.\d+)*)", version.strip())
    if not m:
        return None
    return tuple(int(p) for p in m.group(1).split("."))


def lookup(framework: str, name: str, versions: dict[str, str] | None = None) -> tuple[set[str], str] | None:
    """(possible default values, note) for an unset setting of `framework`, or None when the
    table does not know it. One value when the default is fixed or the deciding version is
    known; several when it changed and the version is unknown."""
    entry = TABLE.get(framework, {}).get(name)
    if entry is None:
        return None
    version = None
    if entry.since and entry.package and versions:
        version = versions.get(entry.package)
    exact = entry.at(version)
    if exact is not None:
        note = entry.note
        if entry.since:
            note = (note + "; " if note else "") + f"{entry.package} {version}"
        return {exact}, note
    return entry.candidates(), (entry.note + "; " if entry.note else "") + "version unknown"
