"""A run's configuration as its training log echoes it (logs collector: `configecho`), merged
into the RunConfig under canonical names. Launch scripts and config files win: a log value only
fills a setting they leave unset, and a disagreement is warned (the log shows what actually ran,
so it usually means the script on disk is not the one that was launched)."""
from __future__ import annotations

from typing import Any

from precdx.collectors.base import RunDir
from precdx.collectors.checklist import aliases
from precdx.collectors.checklist.configdiff import same_value
from precdx.collectors.checklist.runconfig import RunConfig, Setting, norm_value
from precdx.errors import Warnings

# Echo keys that are not the framework's argument name of the same setting (checked before aliases).
RENAME = {
    "total_train_batch_size": "global_batch_size",
    "total_optimization_steps": "train_iters",
    "num_train_examples": "dataset_num_examples",
    "num_trainable_parameters": "num_parameters",
    "padded_vocab_size": "vocab_size_padded",
    "initial_scale_power": "initial_loss_scale",
}
# What echo-only keys govern (they are not in the alias table).
CATEGORY = {
    "load_iteration": "model",
    "weights_file": "model",
    "newly_initialized_weights": "model",
    "unused_checkpoint_weights": "model",
    "num_parameters": "model",
    "checkpoint_dtype": "precision",
    "dataset_num_examples": "data",
    "tokenizer_vocab_size": "data",
    "vocab_size_padded": "model",
    "bos_token_id": "data",
    "eos_token_id": "data",
    "pad_token_id": "data",
}
# Keys echoed by every run that say nothing about numerics (they would only add noise).
_IGNORED = {"local_rank", "rank", "world_size_per_node", "timers", "config_logger_dir", "job.config_file",
            "job.dump_folder", "job.description", "logging_dir", "run_name", "output_dir", "hub_token",
            "push_to_hub_token", "hub_model_id", "use_cache", "return_dict", "output_hidden_states",
            "output_attentions", "torchscript", "_commit_hash", "name_or_path"}


def merge_logs(cfg: RunConfig, run: RunDir, warnings: Warnings) -> None:
    """Add what the run's logs echo to `cfg` (after scripts and files were read)."""
    from precdx.collectors.logs.configecho import read_log_info

    logs = [a for a in run.artefacts if a.kind == "log" and a.detail not in ("binary", "empty")]
    for art in logs:
        info = read_log_info(art.path)
        for message, line in info.problems:
            warnings.add(message, path=str(art.path), line=line)
        if info.versions:
            for pkg, (version, _) in info.versions.items():
                cfg.log_versions.setdefault(pkg, version)
        if info.device and cfg.log_device is None:
            cfg.log_device = info.device
        if info.framework_hint and cfg.log_framework is None:
            cfg.log_framework = info.framework_hint
        if not info.settings:
            continue
        cfg.log_sources.append(str(art.path))
        cfg.log_complete = cfg.log_complete or info.complete_dump
        tp = _int(info.settings, "tensor_model_parallel_size")
        pp = _int(info.settings, "pipeline_model_parallel_size")
        collapsed: dict[str, tuple[str, str, str, int]] = {}  # canonical -> (raw, text, origin, line)
        for es in info.settings.values():
            key = es.key
            if key == "num_parameters_rank0":
                if (tp or 1) * (pp or 1) != 1:
                    continue  # a per-rank count only equals the model's size without TP/PP
                key = "num_parameters"
            for k, v in _expand(key, es.value):
                _collapse(collapsed, k, v, es.origin, es.line)
        for canon, (raw, text, origin, line) in collapsed.items():
            _merge_one(cfg, canon, raw, text, str(art.path), origin, line, warnings)


def _collapse(out: dict[str, tuple[str, str, str, int]], raw: str, value: Any, origin: str, line: int) -> None:
    """Several keys of one log can mean one canonical setting (MindSpeed's use_deter_comp and
    Megatron's deterministic_mode): a flag is on when any of them is; otherwise the stronger echo,
    then the key named like the setting, wins."""
    from precdx.collectors.logs.configecho import RANK

    if raw in _IGNORED or raw.rsplit(".", 1)[-1] in _IGNORED:
        return
    text = norm_value(value)
    if text is None:
        return
    canon, inverted = aliases.canonical(RENAME.get(raw, raw))
    if inverted and text in ("true", "false"):
        text = "false" if text == "true" else "true"
    old = out.get(canon)
    if old is None:
        out[canon] = (raw, text, origin, line)
        return
    if old[1] in ("true", "false") and text in ("true", "false"):
        if text == "true" and old[1] == "false":
            out[canon] = (raw, text, origin, line)
        return
    if RANK[origin] < RANK[old[2]] or (RANK[origin] == RANK[old[2]] and raw == canon):
        out[canon] = (raw, text, origin, line)


def _expand(key: str, value: Any):
    """The value conventions structured configs use (DeepSpeed betas, initial_scale_power)."""
    leaf = key.rsplit(".", 1)[-1].lower()
    prefix = key[: len(key) - len(leaf)]
    if leaf == "betas" and isinstance(value, (list, tuple)) and len(value) == 2:
        return [(prefix + "beta1", value[0]), (prefix + "beta2", value[1])]
    if leaf == "initial_scale_power" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return [("initial_loss_scale", float(2 ** value))]
    return [(key, value)]


def _merge_one(cfg: RunConfig, canon: str, raw: str, text: str, source: str, origin: str, line: int,
               warnings: Warnings) -> None:
    existing = cfg.settings.get(canon)
    if existing is not None:
        if existing.from_log or existing.source == "derived":
            if existing.source == "derived":
                cfg.settings[canon] = _setting(canon, raw, text, source, origin, line)
            return
        if (text.lower() != "auto" and existing.value.lower() not in ("auto", "<random>")
                and not _agrees(existing.value, text)):
            warnings.add(f"'{canon}' is {existing.value} in {existing.source} but the log echoes {text} "
                         f"(line {line}); the launch script or config value is compared. The log shows "
                         "what actually ran: check that the script on disk is the one launched",
                         path=source, line=line)
        elif existing.value.lower() == "auto" and text.lower() != "auto":
            cfg.settings[canon] = _setting(canon, raw, text, source, origin, line)
        return
    cfg.settings[canon] = _setting(canon, raw, text, source, origin, line)


_OFF = ("false", "0", "no", "none", "off", "")


def _agrees(configured: str, echoed: str) -> bool:
    """The log echoes what the script or config sets (a flag the log reports as on agrees with
    any non-off option value, e.g. fsdp 'full_shard auto_wrap' and 'FSDP enabled')."""
    if same_value(configured, echoed):
        return True
    if echoed == "true" and configured.lower() not in _OFF and configured.lower() != "true":
        return True
    return False


def _setting(canon: str, raw: str, text: str, source: str, origin: str, line: int) -> Setting:
    return Setting(canon, raw, text, source, explicit=True, from_log=origin,
                   category=CATEGORY.get(canon))


def _int(settings: dict, key: str) -> int | None:
    s = settings.get(key)
    if s is None:
        return None
    try:
        return int(s.value)
    except (TypeError, ValueError):
        return None
