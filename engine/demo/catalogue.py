"""The demo's fault catalogue: what each injectable fault does on the target and which
canonical failure mode (shared/failure-modes.yaml) a correct diagnosis names. No torch here."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Fault:
    """One injectable fault.

    ``dump`` says which runs get an msprobe dump and in which summary mode ("statistics",
    "md5" or none); ``expected`` holds the extra expected.yaml keys (api, key).
    """

    name: str
    description: str
    failure_mode: str
    runs: tuple[str, ...] = ("baseline", "target")
    dump_mode: str | None = "statistics"
    dump_runs: tuple[str, ...] = ("baseline", "target")
    expected: dict[str, str] = field(default_factory=dict)


FAULTS: dict[str, Fault] = {f.name: f for f in (
    Fault("operator_defect",
          "the target's gelu kernel evaluates the tanh formula in fp16 and drops its 0.5 factor: "
          "inputs match, outputs are about twice the baseline's, the grad norm departs within a "
          "few steps and the loss drifts away from the baseline",
          "operator.precision_defect", expected={"api": "Functional.gelu"}),
    Fault("hyperparameter",
          "the target launch script sets --lr twice as high as the baseline's",
          "config.hyperparameter_mismatch", expected={"key": "lr"}),
    Fault("data_preprocessing",
          "the target's dataset was preprocessed with a vocabulary that reserves two special ids, "
          "so every token id reaching the model is shifted by 2",
          "data.input_mismatch"),
    Fault("wiring",
          "the target's transformer layer applies layer norm after the residual add (post-norm) "
          "instead of before the sublayer (pre-norm)",
          "model.structure_mismatch"),
    Fault("nan_op",
          "the target's softmax kernel writes NaN into one attention row when it hits a bad input "
          "at one iteration; the run stops with Megatron's NaN-in-grad assertion",
          "nan.operator_origin", expected={"api": "Functional.softmax"}),
    Fault("nondeterministic_op",
          "the target's matmul accumulates in a launch-dependent order: the same inputs give "
          "slightly different outputs in a rerun (md5 dumps of target and target_rerun)",
          "determinism.nondeterministic_operator",
          runs=("baseline", "target", "target_rerun"), dump_mode="md5",
          dump_runs=("target", "target_rerun"), expected={"api": "Torch.matmul"}),
    Fault("loss_scale_collapse",
          "fp16 training: a target kernel overflows in backward more and more often, the dynamic "
          "loss scale keeps halving and iterations are skipped",
          "numerics.loss_scale_collapse", dump_mode=None, dump_runs=()),
)}

DEFAULT_FAULT = "operator_defect"
