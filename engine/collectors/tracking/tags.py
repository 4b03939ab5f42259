"""Which scalar names of a tracking tool carry the training curve, per framework, and the
user's own mapping.

Every framework names its scalars its own way (Megatron `lm loss`, HF `train/loss`, torchtitan
`loss_metrics/global_avg_loss`, NeMo `reduced_train_loss`, ...). A `Profile` lists the names of
one framework for each field of the step series; the first profile whose loss name is present
in a source decides the framework reported in facts and whether the logged loss is an average
over the log interval (`windowed`, as HF's Trainer logs it) or the value of that one step.

A user mapping (a YAML file with a top-level `precdx_tracking_tags` key, in the run folder or
the case folder) names the scalars itself::

    precdx_tracking_tags:
      loss: my/train_loss            # one name or a list (the first present wins)
      grad_norm: optim/gnorm
      lr: optim/lr
      loss_scale: amp/scale
      skipped: optim/skipped         # optional: iterations skipped in the logged interval
      eval_loss: my/val_loss         # optional: evaluation points (counted, not compared)
      step: trainer/global_step      # CSV / JSONL / W&B: the column holding the training step
      framework: mytrainer           # optional: name reported in facts (default "generic")
      windowed: false                # optional: logged loss is an average over the interval
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from precdx.errors import PrecdxError

TOP_KEY = "precdx_tracking_tags"
FIELDS = ("loss", "grad_norm", "lr", "loss_scale", "skipped", "eval_loss")
_ALLOWED = set(FIELDS) | {"step", "framework", "windowed"}

# Column / key names that hold the training step in tables and JSON lines (W&B's own `_step`
# counts log calls, so a trainer's global step wins when both are present).
STEP_KEYS = ("train/global_step", "trainer/global_step", "global_step", "step", "Step", "iteration",
             "iter", "current_steps", "_step")


@dataclass(frozen=True)
class Profile:
    framework: str
    loss: tuple[str, ...]
    grad_norm: tuple[str, ...] = ()
    lr: tuple[str, ...] = ()
    loss_scale: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()
    eval_loss: tuple[str, ...] = ()
    windowed: bool = False
    requires: tuple[str, ...] = ()      # further names that must all be present
    step: tuple[str, ...] = STEP_KEYS
    user: bool = False

    def names(self) -> set[str]:
        return {n for f in FIELDS for n in getattr(self, f)} | set(self.step)

    def matches(self, present: set[str]) -> bool:
        return any(n in present for n in self.loss) and all(n in present for n in self.requires)

    def pick(self, fld: str, present: set[str]) -> str | None:
        """The first name of a field present in the source."""
        return next((n for n in getattr(self, fld) if n in present), None)


# Order matters: the first profile whose loss name (and `requires`) is present wins.
PROFILES: tuple[Profile, ...] = (
    # Megatron-LM / MindSpeed / Megatron-DeepSpeed (`--tensorboard-dir`, `--wandb-project`):
    # training_log writes the loss of that very iteration (the console line averages the interval).
    Profile("megatron", loss=("lm loss", "lm-loss-training/lm loss"),
            grad_norm=("grad-norm", "grad-norm/grad-norm"),
            lr=("learning-rate", "learning-rate/learning-rate"),
            loss_scale=("loss-scale", "loss-scale/loss-scale"),
            eval_loss=("lm loss validation", "lm-loss-validation/lm loss validation")),
    # HF Trainer TensorBoard / W&B callbacks (`train/` prefix; loss averaged over logging_steps).
    Profile("hf_trainer", loss=("train/loss",), grad_norm=("train/grad_norm",),
            lr=("train/learning_rate",), eval_loss=("eval/loss",), windowed=True),
    # HF Trainer MLflow callback and trainer_log.jsonl-style exports (plain names plus epoch).
    Profile("hf_trainer", loss=("loss",), grad_norm=("grad_norm",), lr=("learning_rate",),
            eval_loss=("eval_loss",), windowed=True, requires=("learning_rate", "epoch")),
    # torchtitan MetricsProcessor.
    Profile("torchtitan", loss=("loss_metrics/global_avg_loss",), grad_norm=("grad_norm",), lr=("lr",)),
    # NeMo (Lightning loggers): reduced_train_loss of the step being logged.
    Profile("nemo", loss=("reduced_train_loss",), grad_norm=("grad_norm",), lr=("lr",),
            loss_scale=("loss_scale",), eval_loss=("val_loss",)),
    # Anything else that logs a plainly named loss.
    Profile("generic", loss=("train/loss", "train_loss", "loss", "training_loss", "train_loss_step", "Loss"),
            grad_norm=("grad_norm", "train/grad_norm", "grad-norm", "gradient_norm", "total_norm"),
            lr=("lr", "learning_rate", "learning-rate", "train/lr", "train/learning_rate"),
            loss_scale=("loss_scale", "loss-scale", "scaler/scale"),
            eval_loss=("eval_loss", "val_loss", "eval/loss", "validation_loss")),
)


def choose_profile(present: set[str], user: Profile | None = None) -> Profile | None:
    """The profile for a source holding these scalar names: the user's mapping when its loss
    name is present, else the first built-in profile that matches."""
    if user is not None and user.matches(present):
        return user
    for p in PROFILES:
        if p.matches(present):
            return p
    return None


def _names(value, where: str, key: str, line: int | None) -> tuple[str, ...]:
    if isinstance(value, str) and value.strip():
        return (value,)
    if isinstance(value, list) and value and all(isinstance(v, str) and v.strip() for v in value):
        return tuple(value)
    raise PrecdxError(f"'{key}' must be a scalar name or a non-empty list of names", path=where, line=line)


def load_user_profile(path: str | Path) -> Profile:
    """Read a `precdx_tracking_tags` mapping; every mistake is a PrecdxError with file:line."""
    from precdx.yamlsafe import line_of, load_yaml_file

    where = str(path)
    data = load_yaml_file(where)
    if not isinstance(data, dict) or TOP_KEY not in data:
        raise PrecdxError(f"not a tracking tag mapping: expected a top-level '{TOP_KEY}' mapping", path=where)
    body = data[TOP_KEY]
    line = line_of(data, TOP_KEY)
    if not isinstance(body, dict) or not body:
        raise PrecdxError(f"'{TOP_KEY}' must be a non-empty mapping", path=where, line=line)
    unknown = sorted(str(k) for k in body if k not in _ALLOWED)
    if unknown:
        raise PrecdxError(f"unknown key(s) {', '.join(unknown)} (allowed: {', '.join(sorted(_ALLOWED))})",
                          path=where, line=line)
    if "loss" not in body:
        raise PrecdxError("the mapping needs at least 'loss' (the scalar holding the training loss)",
                          path=where, line=line)
    kw: dict = {}
    for key in FIELDS:
        if key in body:
            kw[key] = _names(body[key], where, key, line_of(body, key) or line)
    if "step" in body:
        kw["step"] = _names(body["step"], where, "step", line_of(body, "step") or line) + STEP_KEYS
    framework = body.get("framework", "generic")
    if not isinstance(framework, str) or not framework.strip():
        raise PrecdxError("'framework' must be a non-empty name", path=where, line=line_of(body, "framework") or line)
    windowed = body.get("windowed", False)
    if not isinstance(windowed, bool):
        raise PrecdxError("'windowed' must be true or false", path=where, line=line_of(body, "windowed") or line)
    return Profile(framework=framework.strip(), windowed=windowed, user=True, **kw)


def with_fallbacks(user: Profile) -> Profile:
    """A user profile keeps the generic names for the fields it leaves out."""
    generic = PROFILES[-1]
    return replace(user, **{f: getattr(generic, f) for f in FIELDS if f != "loss" and not getattr(user, f)})


@dataclass
class Mapping:
    """The profile chosen for one source and the scalar name used for each field."""

    profile: Profile
    names: dict[str, str] = field(default_factory=dict)   # field -> scalar name

    @classmethod
    def for_names(cls, present: set[str], user: Profile | None = None) -> "Mapping | None":
        profile = choose_profile(present, user)
        if profile is None:
            return None
        chosen = {}
        for f in FIELDS:
            name = profile.pick(f, present)
            if name is not None:
                chosen[f] = name
        return cls(profile, chosen)

    def wanted(self) -> set[str]:
        return set(self.names.values())
