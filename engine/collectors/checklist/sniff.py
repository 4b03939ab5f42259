"""Recognising checklist artefacts by content: launch scripts, YAML/JSON/TOML training
configs, environment listings, pip listings, hostfiles, evaluation results and model
structure listings. File names are only a tie-breaker.
"""
from __future__ import annotations

import re
from pathlib import Path

from precdx.collectors.base import Artefact
from precdx.collectors.checklist import aliases

_ENV_LINE = re.compile(r"^(?:export\s+|declare\s+-x\s+)?[A-Za-z_][A-Za-z0-9_]*=")
_PIP_FREEZE = re.compile(r"^(?:[A-Za-z0-9][A-Za-z0-9._-]*(?:\[[^\]]*\])?\s*(?:===?|@)\s*\S+|-e\s+\S+)")
_PIP_LIST_ROW = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*\s+\d[\w.+!-]*(\s+\S.*)?$")
_HOST_SLOTS = re.compile(r"^\s*[A-Za-z0-9][A-Za-z0-9_.\-]*\s+slots\s*=\s*\d+\s*$")
_LAUNCHER = re.compile(r"(^|[\s;|&(])(torchrun|python3?|deepspeed|accelerate\s+launch|msrun|"
                       r"mpirun|srun|tune\s+run|llamafactory-cli|swift)\b[^\n]*", re.MULTILINE)
_SCRIPT_ARG = re.compile(r"\S+\.py\b|-m\s+[\w.]+")
_YAML_KEY = re.compile(r"^([A-Za-z_][\w.-]*)\s*:(\s|$)")
_TOML_SECTION = re.compile(r"^\s*\[\[?[A-Za-z_][\w.-]*\]\]?\s*(#.*)?$")
_TOML_KV = re.compile(r"^\s*([A-Za-z_][\w-]*)\s*=\s*\S")
_JSON_KEY = re.compile(r'"([A-Za-z_][\w.-]*)"\s*:')
_PRINT_HEAD = re.compile(r"^[A-Z]\w*\($", re.MULTILINE)
_PRINT_CHILD = re.compile(r"^\s+\(([\w.-]+)\):\s+[A-Za-z_]\w*\(", re.MULTILINE)
_PARAM_LINE = re.compile(r"^\s*([A-Za-z_][\w.]*\.(?:weight|bias|[\w]+))\s*[:\t, ]\s*"
                         r"(?:torch\.Size\(\s*)?[\[(]\s*\d+(?:\s*,\s*\d+)*\s*,?\s*[\])]", re.MULTILINE)

# Keys that say "this is a training configuration" (as opposed to any JSON/YAML file).
_TRAINING_SIGNALS = {
    "lr", "min_lr", "micro_batch_size", "global_batch_size", "gradient_accumulation_steps",
    "train_iters", "weight_decay", "clip_grad", "lr_warmup_iters", "lr_decay_style", "seq_length",
    "zero_stage", "fp16", "bf16", "optimizer", "tensor_model_parallel_size",
    "pipeline_model_parallel_size", "num_layers", "hidden_size", "num_attention_heads",
    "adam_beta1", "adam_beta2", "adam_eps", "train_epochs", "data_path", "seed",
}
_DEEPSPEED_KEYS = {"zero_optimization", "train_micro_batch_size_per_gpu", "train_batch_size",
                   "gradient_clipping", "steps_per_print", "wall_clock_breakdown", "zero_allow_untested_optimizer"}
_HF_TRAINER_KEYS = {"per_device_train_batch_size", "learning_rate", "output_dir", "num_train_epochs",
                    "logging_steps", "lr_scheduler_type", "save_strategy", "gradient_accumulation_steps"}
_HF_MODEL_KEYS = {"architectures", "model_type", "num_hidden_layers", "n_layer", "vocab_size",
                  "hidden_size", "n_embd", "initializer_range"}
_EVAL_KEY = re.compile(r'"(eval_[\w]+|perplexity|ppl|accuracy|exact_match|f1|bleu|rouge[\w-]*|wer|cer)"\s*:'
                       r'\s*-?[\d.]', re.IGNORECASE)
_NOT_OURS_JSON = {"log_history", "dump_path", "task", "wg_distribution", "xy_distribution",
                  "data_mode", "summary_mode", "framework"}


def sniff(path: Path, head: bytes) -> Artefact | None:
    """The checklist artefact this file is, or None."""
    if b"\x00" in head[:8192]:
        return _binary_named(path)
    text = head.decode("utf-8", errors="replace")
    if text.count("\ufffd") > max(8, len(text) // 100):
        return _binary_named(path)
    stripped = text.lstrip("\ufeff \t\r\n")
    name = path.name.lower()
    # "[section]" opens TOML/INI too: a JSON array starts with "[" then a value, not a name
    if stripped.startswith("{") or re.match(r"\[\s*[\[{\"\d\]-]", stripped):
        return _sniff_json(path, stripped, name)
    lines = [ln for ln in text.splitlines()[:400] if ln.strip() and not ln.lstrip().startswith("#")]
    if not lines:
        return None
    if _is_shell(stripped, lines, name):
        return Artefact(path, "config.launch", _launch_flavour(text))
    if _share(lines, _HOST_SLOTS.match) >= 0.8:
        return Artefact(path, "hosts", "hostfile")
    if len(lines) >= 3 and _share(lines, _ENV_LINE.match) >= 0.8 and not _looks_like_freeze(lines):
        return Artefact(path, "env", "export" if lines[0].startswith(("export", "declare")) else "listing")
    pip = _sniff_pip(text, lines)
    if pip:
        return Artefact(path, "pip", pip)
    if _PRINT_HEAD.search(text) and len(_PRINT_CHILD.findall(text)) >= 2:
        return Artefact(path, "model.print", "torch")
    if len(_PARAM_LINE.findall(text)) >= 3 and _share(lines, _PARAM_LINE.match) >= 0.5:
        return Artefact(path, "model.params", "name_shape")
    toml = _sniff_toml(lines, name)
    if toml:
        return Artefact(path, "config.toml", toml)
    yaml_kind = _sniff_yaml(lines, name)
    if yaml_kind:
        return Artefact(path, "config.yaml", yaml_kind)
    return None


def _binary_named(path: Path) -> Artefact | None:
    """An env or pip listing or a launch script that is not text is still ours to report as
    unreadable."""
    name = path.name.lower()
    if name in ("env.txt", "environment.txt", "env.log"):
        return Artefact(path, "env", "unreadable")
    if name in ("pip_freeze.txt", "requirements.txt", "pip_list.txt"):
        return Artefact(path, "pip", "unreadable")
    if name.endswith(".sh"):
        return Artefact(path, "config.launch", "unreadable")
    if name.endswith(".toml"):
        return Artefact(path, "config.toml", "unreadable")
    if name.endswith((".yaml", ".yml")):
        return Artefact(path, "config.yaml", "unreadable")
    return None


def _share(lines: list[str], pred) -> float:
    return sum(1 for ln in lines if pred(ln.strip())) / len(lines)


def _looks_like_freeze(lines: list[str]) -> bool:
    return _share(lines, lambda s: "==" in s and "=" not in s.split("==")[0]) > 0.5


def _is_shell(stripped: str, lines: list[str], name: str) -> bool:
    first = stripped.split("\n", 1)[0]
    if first.startswith("#!") and re.search(r"\b(ba|z|k|da)?sh\b", first):
        return True
    launch = [m.group(0) for m in _LAUNCHER.finditer("\n".join(lines))]
    has_launch = any(_SCRIPT_ARG.search(m) for m in launch)
    if not has_launch:
        return False
    # a log that echoes a command line is not a script: scripts are mostly assignments/commands
    shellish = _share(lines, lambda s: bool(re.match(
        r"^(export\s|[A-Za-z_]\w*=|--?[\w-]+|torchrun|python|deepspeed|accelerate|source\s|set\s|"
        r"mkdir|cd\s|if\s|fi$|then$|else$|done$|for\s|do$|echo\s|\$|\"|\)|[\w/.-]+\.py\b)", s)))
    return shellish >= 0.6 or name.endswith(".sh")


def _launch_flavour(text: str) -> str:
    low = text.lower()
    if "--deepspeed" in low or re.search(r"(^|\s)deepspeed\s", low):
        return "megatron_deepspeed" if "pretrain_" in low else "deepspeed"
    if re.search(r"pretrain_\w+\.py|--tensor-model-parallel-size|--micro-batch-size", low):
        return "mindspeed" if ("mindspeed" in low or "npus_per_node" in low or "ascend" in low) else "megatron"
    if re.search(r"\.toml\b", low) or "torchtitan" in low:
        return "torchtitan"
    if re.search(r"\.ya?ml\b|per_device_train_batch_size|--learning_rate", low):
        return "hf_trainer"
    return "generic"


def _sniff_pip(text: str, lines: list[str]) -> str | None:
    if text.lstrip().startswith("# packages in environment at"):
        return "conda"
    head = lines[0].split()
    if len(head) >= 2 and head[0].lower() == "package" and head[1].lower() == "version":
        rows = [ln for ln in lines[2:] if not set(ln.strip()) <= {"-", " "}]
        if rows and _share(rows, _PIP_LIST_ROW.match) >= 0.8:
            return "list"
    if len(lines) >= 3 and _share(lines, _PIP_FREEZE.match) >= 0.8:
        return "freeze"
    return None


def _known(keys) -> set[str]:
    return {aliases.canonical(k)[0] for k in keys} & _TRAINING_SIGNALS


def _sniff_json(path: Path, text: str, name: str) -> Artefact | None:
    keys = set(_JSON_KEY.findall(text))
    if "log_history" in keys or (keys & _NOT_OURS_JSON and not keys & _DEEPSPEED_KEYS):
        return None  # trainer_state.json, msprobe configs and dumps belong to other collectors
    if len(_EVAL_KEY.findall(text)) >= 1 and not _known(keys) - {"seed", "train_epochs"}:
        return Artefact(path, "eval", "metrics")
    if '"results"' in text and re.search(r'"(acc|acc_norm|exact_match|f1)(,[\w-]+)?"\s*:', text):
        return Artefact(path, "eval", "lm_eval")
    if keys & _DEEPSPEED_KEYS:
        return Artefact(path, "config.json", "deepspeed")
    if len(keys & _HF_MODEL_KEYS) >= 3:
        return Artefact(path, "config.json", "hf_model")
    if len(keys & _HF_TRAINER_KEYS) >= 2:
        return Artefact(path, "config.json", "hf_trainer")
    if len(_known(keys)) >= 3:
        return Artefact(path, "config.json", "generic")
    return None


def _sniff_toml(lines: list[str], name: str) -> str | None:
    sections = sum(1 for ln in lines if _TOML_SECTION.match(ln))
    kvs = [m.group(1) for ln in lines if (m := _TOML_KV.match(ln))]
    if sections < 1 or len(kvs) < 3:
        return None
    if (sections + len(kvs)) / len(lines) < 0.8:
        return None
    if len(_known(kvs)) + len(_known("training." + k for k in kvs)) < 2:
        return None
    return "torchtitan" if any(ln.strip().startswith(("[job]", "[parallelism]", "[training]"))
                               for ln in lines) else "generic"


def _sniff_yaml(lines: list[str], name: str) -> str | None:
    top = [m.group(1) for ln in lines if (m := _YAML_KEY.match(ln))]
    if len(top) < 3:
        return None
    structural = sum(1 for ln in lines if _YAML_KEY.match(ln.strip()) or ln.lstrip().startswith("- "))
    if structural / len(lines) < 0.8:
        return None
    if len(_known(top)) < 2:
        return None
    return "hf_trainer" if len(set(top) & _HF_TRAINER_KEYS) >= 2 else "generic"

