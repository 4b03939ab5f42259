"""The training-setting vocabulary: which spelling in which framework means which canonical
Megatron-style argument (argparse dest), and what each setting governs (its category).
"""
from __future__ import annotations

import re

# canonical name -> (category, aliases). Aliases are normalised spellings (lower case, '-' -> '_',
# no leading dashes); dotted aliases match nested config keys (DeepSpeed, torchtitan, ...).
_TABLE: dict[str, tuple[str, tuple[str, ...]]] = {
    # hyperparameters
    "lr": ("hyperparameter", ("learning_rate", "optimizer.lr", "optimizer.params.lr", "optim.lr",
                              "optimizer.learning_rate", "training.lr", "training.learning_rate",
                              "learningrate", "base_lr", "peak_lr")),
    "min_lr": ("hyperparameter", ("lr_scheduler_kwargs.min_lr", "min_learning_rate", "lr_min",
                                  "lr_scheduler.lr_min", "scheduler.min_lr", "optimizer.min_lr",
                                  "scheduler.params.warmup_min_lr_final")),
    "lr_decay_style": ("hyperparameter", ("lr_scheduler_type", "lr_scheduler.decay_type",
                                          "scheduler.type", "lr_scheduler_name", "lr_schedule",
                                          "decay_style", "lr_scheduler.name")),
    "lr_warmup_iters": ("hyperparameter", ("warmup_steps", "lr_warmup_steps", "warmup_iters",
                                           "lr_scheduler.warmup_steps", "scheduler.params.warmup_num_steps",
                                           "num_warmup_steps", "warmup")),
    "lr_warmup_fraction": ("hyperparameter", ("warmup_ratio", "warmup_fraction")),
    "lr_warmup_init": ("hyperparameter", ("scheduler.params.warmup_min_lr", "warmup_init_lr")),
    "lr_decay_iters": ("hyperparameter", ("lr_decay_steps", "decay_steps", "scheduler.params.total_num_steps",
                                          "lr_scheduler.decay_steps")),
    "train_iters": ("hyperparameter", ("max_steps", "training.steps", "total_steps", "max_iters",
                                       "num_train_steps", "trainer.max_steps", "train_steps")),
    "train_epochs": ("hyperparameter", ("num_train_epochs", "epochs", "epoch", "max_epochs")),
    "micro_batch_size": ("hyperparameter", ("per_device_train_batch_size", "train_micro_batch_size_per_gpu",
                                            "micro_batch", "batch_size_per_gpu", "per_gpu_train_batch_size",
                                            "training.batch_size", "training.local_batch_size",
                                            "batch_size", "bs", "mbs", "micro_bs")),
    "global_batch_size": ("hyperparameter", ("train_batch_size", "total_batch_size", "gbs",
                                             "training.global_batch_size", "global_batch")),
    "gradient_accumulation_steps": ("hyperparameter", ("gradient_accumulation_iters", "grad_accum_steps",
                                                       "accumulate_grad_batches", "grad_acc_steps",
                                                       "gradient_accumulation")),
    "weight_decay": ("hyperparameter", ("wd", "optimizer.weight_decay", "optimizer.params.weight_decay",
                                        "optim.weight_decay")),
    "adam_beta1": ("hyperparameter", ("beta1", "optimizer.beta1", "optimizer.params.beta1")),
    "adam_beta2": ("hyperparameter", ("beta2", "optimizer.beta2", "optimizer.params.beta2")),
    "adam_eps": ("hyperparameter", ("adam_epsilon", "optimizer.eps", "optimizer.params.eps",
                                    "optim.eps", "optimizer.epsilon")),
    "clip_grad": ("hyperparameter", ("max_grad_norm", "gradient_clipping", "grad_clip", "training.max_norm",
                                     "max_norm", "clip_grad_norm", "grad_clip_norm")),
    "optimizer": ("hyperparameter", ("optim", "optimizer.type", "optimizer.name", "optimizer_type")),
    "sgd_momentum": ("hyperparameter", ("momentum", "optimizer.momentum", "optimizer.params.momentum")),
    "hidden_dropout": ("hyperparameter", ("resid_dropout", "resid_pdrop", "hidden_dropout_prob",
                                          "dropout", "drop_rate", "hidden_dropout_rate", "dropout_rate",
                                          "model.dropout")),
    "attention_dropout": ("hyperparameter", ("attn_dropout", "attn_pdrop", "attention_probs_dropout_prob",
                                             "attention_dropout_rate", "attn_drop_rate")),
    "embedding_dropout": ("hyperparameter", ("embd_dropout", "embd_pdrop", "embed_dropout")),
    "label_smoothing": ("hyperparameter", ("label_smoothing_factor",)),
    "calculate_per_token_loss": ("hyperparameter", ()),
    "loss_reduction": ("hyperparameter", ("average_tokens_across_devices",)),
    # parallel strategy
    "tensor_model_parallel_size": ("parallel", ("tp", "tensor_parallel_size", "tensor_parallel_degree",
                                                "parallelism.tensor_parallel_degree", "tp_size",
                                                "model_parallel_size")),
    "pipeline_model_parallel_size": ("parallel", ("pp", "pipeline_parallel_size", "pipeline_parallel_degree",
                                                  "parallelism.pipeline_parallel_degree", "pp_size")),
    "context_parallel_size": ("parallel", ("cp", "context_parallel_degree",
                                           "parallelism.context_parallel_degree", "cp_size")),
    "expert_model_parallel_size": ("parallel", ("ep", "expert_parallel_size", "expert_parallel_degree",
                                                "parallelism.expert_parallel_degree")),
    "data_parallel_size": ("parallel", ("dp", "dp_size", "data_parallel_degree")),
    "data_parallel_shard_degree": ("parallel", ("parallelism.data_parallel_shard_degree",)),
    "data_parallel_replicate_degree": ("parallel", ("parallelism.data_parallel_replicate_degree",)),
    "sequence_parallel": ("parallel", ("sp", "sequence_parallelism", "enable_sequence_parallel")),
    "virtual_pipeline_model_parallel_size": ("parallel", ("vpp",)),
    "num_layers_per_virtual_pipeline_stage": ("parallel", ()),
    "use_distributed_optimizer": ("parallel", ("distributed_optimizer",)),
    "zero_stage": ("parallel", ("zero_optimization.stage", "zero", "deepspeed_zero_stage")),
    "fsdp": ("parallel", ("fsdp_sharding_strategy", "fsdp_config.sharding_strategy")),
    # the distributed wrapper itself (Accelerate's config: NO / MULTI_GPU / DEEPSPEED / FSDP / MEGATRON_LM)
    "distributed_type": ("parallel", ()),
    "nproc_per_node": ("parallel", ("nproc", "gpus_per_node", "npus_per_node", "num_gpus", "num_npus",
                                    "ngpus_per_node")),
    "nnodes": ("parallel", ("num_nodes",)),
    "world_size": ("parallel", ()),
    # precision
    "fp16": ("precision", ("fp16.enabled", "half", "float16")),
    "bf16": ("precision", ("bf16.enabled", "bfloat16.enabled", "bfloat16")),
    "tf32": ("precision", ("allow_tf32",)),
    "params_dtype": ("precision", ("torch_dtype", "dtype", "model.dtype", "training.mixed_precision_param",
                                   "mixed_precision_param")),
    "mixed_precision_reduce": ("precision", ("training.mixed_precision_reduce",)),
    "loss_scale": ("precision", ("fp16.loss_scale",)),
    "initial_loss_scale": ("precision", ()),
    "loss_scale_window": ("precision", ("fp16.loss_scale_window",)),
    "hysteresis": ("precision", ("fp16.hysteresis",)),
    "min_loss_scale": ("precision", ("fp16.min_loss_scale",)),
    "attention_softmax_in_fp32": ("precision", ()),
    "accumulate_allreduce_grads_in_fp32": ("precision", ()),
    # DeepSpeed data_types.grad_accum_dtype (fp32 accumulation under ZeRO, DeepSpeed >= 0.9)
    "grad_accum_dtype": ("precision", ("data_types.grad_accum_dtype",)),
    "communication_data_type": ("precision", ()),
    "fp32_residual_connection": ("precision", ()),
    "apply_query_key_layer_scaling": ("precision", ()),
    "mixed_precision": ("precision", ("amp", "precision")),
    # framework options (fused kernels, overlap, recomputation)
    "overlap_grad_reduce": ("framework_option", ()),
    "overlap_param_gather": ("framework_option", ()),
    "overlap_comm": ("framework_option", ("zero_optimization.overlap_comm",)),
    "use_flash_attn": ("framework_option", ("flash_attn", "use_flash_attention", "flash_attention",
                                            "use_fused_attn", "use_fusion_attn", "model.use_flex_attn")),
    "attn_implementation": ("framework_option", ("_attn_implementation",)),
    "use_fused_rmsnorm": ("framework_option", ()),
    "use_fused_swiglu": ("framework_option", ()),
    "use_fused_rotary_pos_emb": ("framework_option", ()),
    "masked_softmax_fusion": ("framework_option", ()),
    "bias_gelu_fusion": ("framework_option", ()),
    "bias_dropout_fusion": ("framework_option", ()),
    "bias_swiglu_fusion": ("framework_option", ()),
    "gradient_accumulation_fusion": ("framework_option", ()),
    "transformer_impl": ("framework_option", ()),
    "use_mcore_models": ("framework_option", ()),
    "recompute_granularity": ("framework_option", ("activation_checkpoint.mode", "gradient_checkpointing",
                                                   "checkpoint_activations")),
    "recompute_method": ("framework_option", ()),
    "recompute_num_layers": ("framework_option", ()),
    "torch_compile": ("framework_option", ("compile", "training.compile", "compile.enable")),
    # determinism
    "seed": ("determinism", ("training.seed", "random_seed", "debug.seed", "seed_value")),
    "data_seed": ("determinism", ()),
    "deterministic_mode": ("determinism", ("use_deter_comp", "npu_deterministic", "full_determinism",
                                           "training.deterministic", "debug.deterministic", "deterministic",
                                           "use_deterministic_algorithms")),
    # data
    "data_path": ("data", ("dataset", "data_dir", "train_data_path", "dataset_path", "training.dataset_path",
                           "train_file", "dataset_name", "training.dataset", "datasets", "data.path",
                           "train_data")),
    "tokenizer_type": ("data", ()),
    "tokenizer_model": ("data", ("tokenizer_name_or_path", "tokenizer_name", "tokenizer_path",
                                 "model.tokenizer_path", "tokenizer")),
    "vocab_file": ("data", ()),
    "merge_file": ("data", ()),
    "seq_length": ("data", ("block_size", "max_seq_length", "seq_len", "training.seq_len", "max_seq_len",
                            "model_max_length", "cutoff_len", "sequence_length", "max_length")),
    "split": ("data", ("data_split",)),
    "append_eod": ("data", ()),
    "mock_data": ("data", ()),
    "reset_position_ids": ("data", ()),
    "reset_attention_mask": ("data", ()),
    "eod_mask_loss": ("data", ()),
    "dataloader_drop_last": ("data", ()),
    "group_by_length": ("data", ()),
    "shuffle": ("data", ("data_shuffle", "dataloader_shuffle", "data.shuffle", "shuffle_data")),
    "packing": ("data", ("pack_sequences",)),
    "template": ("data", ("prompt_type", "chat_template")),
    # model structure and weights
    "num_layers": ("model", ("num_hidden_layers", "n_layer", "n_layers", "model.n_layers", "encoder_num_layers")),
    "hidden_size": ("model", ("n_embd", "d_model", "dim", "model.dim", "model.hidden_size")),
    "ffn_hidden_size": ("model", ("intermediate_size", "n_inner", "ffn_dim", "model.ffn_dim")),
    "num_attention_heads": ("model", ("n_head", "num_heads", "n_heads", "model.n_heads")),
    "num_query_groups": ("model", ("num_key_value_heads", "n_kv_heads", "model.n_kv_heads")),
    "max_position_embeddings": ("model", ("n_positions", "n_ctx")),
    "position_embedding_type": ("model", ()),
    "normalization": ("model", ("norm_type", "model.norm_type")),
    "norm_epsilon": ("model", ("layernorm_epsilon", "rms_norm_eps", "layer_norm_epsilon", "layer_norm_eps",
                               "norm_eps", "model.norm_eps")),
    "untie_embeddings_and_output_weights": ("model", ()),
    "swiglu": ("model", ()),
    "add_bias_linear": ("model", ()),
    "add_qkv_bias": ("model", ()),
    "rotary_base": ("model", ("rope_theta", "model.rope_theta")),
    "activation_function": ("model", ("hidden_act", "activation")),
    "apply_residual_connection_post_layernorm": ("model", ()),
    "init_method_std": ("model", ("initializer_range", "init_std")),
    "vocab_size": ("model", ("model.vocab_size", "padded_vocab_size")),
    "make_vocab_size_divisible_by": ("model", ()),
    "num_experts": ("model", ("num_local_experts", "n_routed_experts", "moe_num_experts")),
    "moe_router_topk": ("model", ("num_experts_per_tok", "top_k", "moe_top_k")),
    "moe_aux_loss_coeff": ("model", ("router_aux_loss_coef", "aux_loss_alpha")),
    "load": ("model", ("model_name_or_path", "pretrained_checkpoint", "checkpoint.initial_load_path",
                       "load_checkpoint", "resume_from_checkpoint", "init_from")),
    "model_name": ("model", ("model.name", "model_type")),
    "model_flavor": ("model", ("model.flavor",)),
    "finetune": ("model", ()),
    "no_load_optim": ("model", ()),
    "no_load_rng": ("model", ()),
    # loss mask, packing, rotary embedding and fused-kernel switches (failure modes
    # data.loss_mask_mismatch, data.packing_attention_leak, model.rope_mismatch,
    # config.fused_kernel_mismatch): Megatron / MindSpeed / HF / TRL / LLaMA-Factory spellings
    "ignore_index": ("data", ("loss_ignore_index",)),
    "label_pad_token_id": ("data", ()),
    "ignore_pad_token_for_loss": ("data", ()),
    "train_on_prompt": ("data", ("train_on_inputs", "train_on_input")),
    "mask_history": ("data", ()),
    "completion_only_loss": ("data", ()),
    "assistant_only_loss": ("data", ()),
    "is_instruction_dataset": ("data", ()),
    "neat_packing": ("data", ("neat_pack",)),  # packing with per-document attention, unlike plain packing
    "padding_free": ("data", ()),
    "dataloader_inter_document_masking": ("data", ()),
    "rotary_percent": ("model", ("partial_rotary_factor",)),
    "rotary_interleaved": ("model", ()),
    "rotary_seq_len_interpolation_factor": ("model", ()),
    "use_rope_scaling": ("model", ()),
    "rope_scaling_type": ("model", ("rope_scaling", "rope_scaling.type", "rope_scaling.rope_type", "rope_type")),
    "rope_scaling_factor": ("model", ("rope_scaling.factor", "rotary_scaling_factor")),
    "rope_scaling_original_max_position_embeddings": ("model", ("yarn_original_max_position_embeddings",
                                                                "rope_scaling.original_max_position_embeddings")),
    "use_glm_rope": ("model", ()),
    "cross_entropy_loss_fusion": ("framework_option", ()),
    "cross_entropy_fusion_impl": ("framework_option", ()),
    "use_liger_kernel": ("framework_option", ("enable_liger_kernel",)),
    "moe_grouped_gemm": ("framework_option", ()),
    "moe_permute_fusion": ("framework_option", ("use_fused_moe_token_permute_and_unpermute",)),
    "gemm_gradient_accumulation_fusion": ("framework_option", ()),
    "no_persist_layer_norm": ("framework_option", ()),
    # logging, checkpoint saving, evaluation cadence, run-time checks: never a cause of a
    # numerics mismatch
    "check_for_nan_in_loss_and_grad": ("logging", ()),
    "check_for_spiky_loss": ("logging", ()),
    "log_throughput": ("logging", ()),
    "log_interval": ("logging", ("logging_steps", "metrics.log_freq", "log_freq", "log_every")),
    "save_interval": ("logging", ("save_steps", "checkpoint.interval", "checkpoint_interval")),
    "eval_interval": ("logging", ("eval_steps", "evaluation_interval")),
    "eval_iters": ("logging", ()),
    "save": ("logging", ("output_dir", "checkpoint.folder", "save_dir", "out_dir")),
    # device placement and infrastructure
    "distributed_backend": ("device", ("backend", "dist_backend")),
    "master_addr": ("device", ()),
    "master_port": ("device", ()),
    "node_rank": ("device", ()),
}

# Megatron `--no-X` flags whose dest keeps the `no_` prefix (they do not negate an `X` dest).
NO_PREFIX_KEPT = {"no_load_optim", "no_load_rng", "no_save_optim", "no_save_rng", "no_shared_storage",
                  "no_persist_layer_norm", "no_pad_to_seq_lengths"}
# Megatron `--no-X` / `--disable-X` flags whose dest is a differently named positive setting.
NEGATIVE_FLAGS = {
    "no_initialization": "!perform_initialization",
    "no_rope_fusion": "!use_fused_rotary_pos_emb",  # Megatron's rope fusion switch
    "no_position_embedding": "add_position_embedding",
    "disable_bias_linear": "!add_bias_linear",
    "no_overlap_p2p_communication": "!overlap_p2p_comm",
    "tie_word_embeddings": "!untie_embeddings_and_output_weights",  # '!' = inverted meaning
}

_ALIASES: dict[str, str] = {}
_CATEGORY: dict[str, str] = {}
for _canon, (_cat, _aliases) in _TABLE.items():
    _CATEGORY[_canon] = _cat
    _ALIASES[_canon] = _canon
    for _a in _aliases:
        _ALIASES[_a] = _canon


def normalise(raw: str) -> str:
    """`--Learning-Rate` -> `learning_rate`."""
    return raw.strip().lstrip("-").strip().lower().replace("-", "_")


def canonical(raw: str) -> tuple[str, bool]:
    """Canonical name of a setting and whether its boolean meaning is inverted
    (tie_word_embeddings=true means untie_embeddings_and_output_weights=false)."""
    key = normalise(raw)
    inverted = False
    if key in NEGATIVE_FLAGS:
        target = NEGATIVE_FLAGS[key]
        inverted = target.startswith("!")
        key = target.lstrip("!")
        return _ALIASES.get(key, key), inverted
    if key in _ALIASES:
        return _ALIASES[key], False
    last = key.rsplit(".", 1)[-1]
    # A nested key is only matched by its last component when that component is unambiguous
    # (a specific name such as learning_rate, not a generic one such as enabled or type).
    if "." in key and last in _ALIASES and last not in _AMBIGUOUS_LEAVES:
        return _ALIASES[last], False
    return key, False


_AMBIGUOUS_LEAVES = {"enabled", "type", "name", "stage", "dim", "eps", "path", "dtype", "dropout",
                     "seed", "interval", "folder", "steps", "compile", "mode", "precision", "zero",
                     "tp", "pp", "cp", "ep", "dp", "sp", "bs", "epoch", "warmup", "activation",
                     "backend", "deterministic", "shuffle", "template", "tokenizer", "dataset",
                     "datasets", "momentum", "beta1", "beta2", "model_type"}

_PATTERNS: list[tuple[re.Pattern, str]] = [
    (re.compile(r"(^|_)(npu|ascend|cuda|gpu|device|hccl|nccl|cann|jit_compile)(_|$)|^use_ascend|"
                r"^no_shared_storage$|^local_rank$|^distributed_timeout|^use_cpu_initialization$"), "device"),
    (re.compile(r"^(log|logging|tensorboard|wandb|timing|profile|report_to|save|eval|exit|"
                r"ckpt|checkpoint|async_save|no_save|dataloader_num_workers|num_workers|"
                r"disable_tqdm|run_name|project|metrics)"), "logging"),
    (re.compile(r"overlap|fused|fusion|flash|recompute|compile|_impl$|use_mc|coc"), "framework_option"),
    (re.compile(r"seed|determinis"), "determinism"),
    (re.compile(r"fp16|bf16|fp32|fp8|dtype|precision|loss_scale|tf32|hf32"), "precision"),
    (re.compile(r"parallel|zero|fsdp|ddp|shard|world_size|bucket"), "parallel"),
    (re.compile(r"^(data|dataset|tokenizer|vocab|seq_|split|train_samples|padding|pad_|eod|"
                r"prompt|template|is_instruction_dataset)"), "data"),
    (re.compile(r"layer|hidden|head|embedding|norm|position|rotary|rope|ffn|expert|moe|bias|"
                r"swiglu|geglu|activation|init|^load"), "model"),
    (re.compile(r"lr|learning_rate|batch|iters|steps|warmup|decay|adam|beta|clip|dropout|momentum|"
                r"optimizer|loss"), "hyperparameter"),
]


def category(canon: str) -> str:
    """What a canonical setting governs; unknown keys are classified by name patterns."""
    if canon in _CATEGORY:
        return _CATEGORY[canon]
    leaf = canon.rsplit(".", 1)[-1]
    for pattern, cat in _PATTERNS:
        if pattern.search(canon) or pattern.search(leaf):
            return cat
    return "other"


def is_known(canon: str) -> bool:
    """A setting of the curated vocabulary (gets a config_value fact per run)."""
    return canon in _CATEGORY
