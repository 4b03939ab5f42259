"""The demo's fault catalogue: what each injectable fault does on the target and which
canonical failure mode (shared/failure-modes.yaml) a correct diagnosis names; and the seeded
random parameters of one lab case (model size, fault step, fault strength, which operator, log
format). No torch here."""
from __future__ import annotations

import random
from dataclasses import dataclass, field, replace


@dataclass(frozen=True)
class Fault:
    """One injectable fault.

    ``dump`` says which runs get an msprobe dump and in which summary mode ("statistics",
    "md5" or none); ``expected`` holds the extra expected.yaml keys (api, key).
    ``operators`` / ``variants`` are what a seeded case may pick from (the first is the
    default); ``strength`` the range of the fault's strength; ``one_sided`` says a dump of the
    failing run(s) alone carries the fault's evidence (a NaN, or a rerun pair);
    ``watchable``: ``precdx demo --watch`` supports it.
    """

    name: str
    description: str
    failure_mode: str
    runs: tuple[str, ...] = ("baseline", "target")
    dump_mode: str | None = "statistics"
    dump_runs: tuple[str, ...] = ("baseline", "target")
    expected: dict[str, str] = field(default_factory=dict)
    operators: tuple[str, ...] = ()
    variants: tuple[str, ...] = ()
    strength: tuple[float, float] = (1.0, 1.0)
    one_sided: bool = False
    watchable: bool = False
    lab_variants: tuple[str, ...] | None = None   # variants a seeded case picks from (None: all)


FAULTS: dict[str, Fault] = {f.name: f for f in (
    Fault("operator_defect",
          "the target's gelu kernel evaluates the tanh formula in fp16 and drops its 0.5 factor: "
          "inputs match, outputs are about twice the baseline's, the grad norm departs within a "
          "few steps and the loss drifts away from the baseline (seeded cases pick gelu, softmax "
          "or layer_norm and how far the output is off)",
          "operator.precision_defect", expected={"api": "Functional.gelu"},
          operators=("gelu", "softmax", "layer_norm"), strength=(0.15, 1.0), watchable=True),
    Fault("hyperparameter",
          "the target launch script sets --lr twice as high as the baseline's (seeded cases: lr, "
          "warmup iterations or adam eps, by a random factor)",
          "config.hyperparameter_mismatch", expected={"key": "lr"},
          variants=("lr", "lr_warmup_iters", "adam_eps"), strength=(2.0, 5.0), watchable=True),
    Fault("data_preprocessing",
          "the target's dataset was preprocessed with a vocabulary that reserves two special ids, "
          "so every token id reaching the model is shifted by 2 (seeded cases: shift by 1-3, or "
          "samples drawn in another order)",
          "data.input_mismatch", variants=("offset", "order"), strength=(1.0, 3.0), watchable=True),
    Fault("wiring",
          "the target's transformer layer applies layer norm after the residual add (post-norm) "
          "instead of before the sublayer (pre-norm) (seeded cases: post-norm or a parallel "
          "attention/MLP residual)",
          "model.structure_mismatch", variants=("post_norm", "parallel_residual"), watchable=True),
    Fault("nan_op",
          "the target's softmax kernel writes NaN into one attention row when it hits a bad input "
          "at one iteration; the run stops with Megatron's NaN-in-grad assertion (seeded cases: "
          "softmax, gelu or layer_norm, at a random iteration)",
          "nan.operator_origin", expected={"api": "Functional.softmax"},
          operators=("softmax", "gelu", "layer_norm"), one_sided=True, watchable=True),
    Fault("nondeterministic_op",
          "the target's matmul accumulates in a launch-dependent order: the same inputs give "
          "slightly different outputs in a rerun (md5 dumps of target and target_rerun)",
          "determinism.nondeterministic_operator",
          runs=("baseline", "target", "target_rerun"), dump_mode="md5",
          dump_runs=("target", "target_rerun"), expected={"api": "Torch.matmul"},
          operators=("matmul", "softmax"), strength=(1e-6, 1e-4), one_sided=True, watchable=True),
    Fault("loss_scale_collapse",
          "fp16 training: a target kernel overflows in backward more and more often, the dynamic "
          "loss scale keeps halving and iterations are skipped",
          "numerics.loss_scale_collapse", dump_mode=None, dump_runs=(),
          variants=("after_backward", "kernel"), lab_variants=("kernel",), one_sided=True, watchable=True),
    Fault("weight_init",
          "the target loads another checkpoint: one weight (the word embeddings by default) "
          "starts from different values, so the runs differ from the very first forward",
          "model.weight_init_mismatch",
          variants=("word_embeddings", "position_embeddings", "output_layer"), strength=(0.5, 1.0)),
    Fault("optimizer_update",
          "the target's AdamW skips the bias correction of its moments: step 0 matches the "
          "baseline exactly, the parameters after the first update do not (dumps of steps 0 and 1; "
          "seeded cases: at a random update the moments are reset as by a resume without the "
          "optimizer state, while the step count of the bias correction goes on)",
          "optimizer.update_mismatch", variants=("no_bias_correction", "moments_reset", "bf16_master_weights"),
          lab_variants=("moments_reset",)),
    Fault("precision",
          "the target trains in bf16 (--bf16) while the baseline trains in fp32: every tensor is "
          "rounded from the first operator on",
          "config.precision_mismatch"),
    Fault("loss_definition",
          "the target averages the loss per sample (summed over the tokens) instead of per token: "
          "logits and token losses match, the reported loss is a constant multiple of the "
          "baseline's",
          "loss.definition_mismatch", variants=("per_sample_sum", "grad_acc_twice")),
    Fault("nan_weight",
          "the target's optimizer writes a non-finite value into one weight at one update: the next "
          "iteration's forward starts from a NaN parameter and the run stops",
          "nan.previous_step_backward",
          variants=("linear_fc1", "linear_qkv", "output_layer"), one_sided=True),
    Fault("nan_unhooked",
          "a custom kernel the dump does not capture (patched into the attention block) writes NaN "
          "into its output at one iteration: the first dumped API that sees it has a NaN input "
          "and finite inputs before it",
          "nan.unhooked_operator", variants=("after_qkv", "after_fc1"), one_sided=True),
    Fault("memory_stomp",
          "a concurrent stream overwrites memory on the target: NaN appears at one iteration, at a "
          "different place in every launch (target and target_rerun, dumped at that iteration)",
          "memory.stomping_multistream", runs=("baseline", "target", "target_rerun"),
          dump_runs=("baseline", "target", "target_rerun"), one_sided=True),
    Fault("randomness",
          "both sides train with dropout; the target sets no seed, so every launch draws different "
          "dropout masks and a rerun of the target does not reproduce it",
          "determinism.randomness_not_fixed", runs=("baseline", "target", "target_rerun"),
          dump_mode="md5", dump_runs=("target", "target_rerun"), one_sided=True),
    Fault("bf16_embedding_grad",
          "the target accumulates the word-embedding gradient in bf16: its error grows over the "
          "iterations until the gradient norm leads the loss away from the baseline",
          "numerics.bf16_gradient_instability", strength=(0.5, 1.5)),
    Fault("input_id_out_of_range",
          "the target's tokenizer emits ids beyond the model's vocabulary; the embedding's padded "
          "rows (never trained, never initialised like the others) are read for them",
          "data.input_id_out_of_range", strength=(0.1, 0.4)),
)}

DEFAULT_FAULT = "operator_defect"

LOG_FORMATS = ("megatron", "mindspeed", "deepspeed", "hf", "torchtitan")


@dataclass(frozen=True)
class LabParams:
    """How one lab case is built: the model, where and how hard the fault hits, and how the
    runs are logged. ``LabParams()`` is the classic demo (Megatron log, the fault's defaults)."""

    hidden: int = 32
    layers: int = 2
    heads: int = 4
    seq: int = 32
    vocab: int = 64
    fault_step: int | None = None   # 0-based iteration where a one-off fault fires (None: its default)
    strength: float | None = None   # None: the fault's classic strength
    operator: str | None = None     # None: the fault's first operator
    variant: str | None = None      # None: the fault's first variant
    log_format: str = "megatron"
    summary_mode: str | None = None  # dump summary mode (None: the fault's dump_mode)
    level: str = "mix"               # dump level
    monitor: bool = False           # write msprobe training-monitor (TrainerMon v1) output
    monitor_alerts: bool = True     # ... with anomaly_detected/ alert files
    monitor_record_steps: int = 1   # TrainerMon step_count_per_record

    def pick(self, fault: Fault) -> "LabParams":
        """Fill the fault-specific defaults."""
        return replace(self, operator=self.operator or (fault.operators[0] if fault.operators else None),
                       variant=self.variant or (fault.variants[0] if fault.variants else None),
                       summary_mode=self.summary_mode or fault.dump_mode or "statistics")


def sample_params(fault: Fault, seed: int, steps: int) -> LabParams:
    """Seeded random parameters of one lab case (the evaluation matrix): the same (fault, seed,
    steps) always gives the same case."""
    rnd = random.Random(f"{fault.name}:{seed}:{steps}")
    hidden = rnd.choice((32, 48, 64))
    heads = rnd.choice((2, 4))
    lo, hi = fault.strength
    strength = lo * (hi / lo) ** rnd.random() if lo > 0 and hi > lo else lo
    return LabParams(
        hidden=hidden, layers=rnd.choice((1, 2, 3)), heads=heads, seq=rnd.choice((16, 32)),
        vocab=rnd.choice((64, 96)),
        fault_step=rnd.randint(max(2, steps // 3), max(3, steps - 6)),
        strength=strength,
        operator=rnd.choice(fault.operators) if fault.operators else None,
        variant=rnd.choice(fault.lab_variants or fault.variants) if fault.variants else None,
        log_format=rnd.choice(LOG_FORMATS),
        summary_mode=rnd.choice(("statistics", "md5")),
        monitor=True, monitor_alerts=rnd.random() < 0.5,
        monitor_record_steps=rnd.choice((1, 5, steps)),
    ).pick(fault)
