"""One run's effective training configuration: the launch script's training command and
exports, structured config files and the environment listing, merged under canonical
setting names, plus the few settings derivable from others (world size, data-parallel size,
global batch, gradient accumulation).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from precdx.collectors.base import RunDir
from precdx.collectors.checklist import aliases
from precdx.collectors.checklist.configfiles import ConfigFileError, flatten, load
from precdx.collectors.checklist.envlisting import read_env_listing
from precdx.collectors.checklist.frameworks import detect_framework
from precdx.collectors.checklist.shell import Command, ShellLimitError, ShellScript, read_script
from precdx.errors import Warnings

MAX_SCRIPT_BYTES = 4 * 1024 * 1024
_LAUNCHERS = {"torchrun", "python", "python3", "deepspeed", "accelerate", "msrun", "mpirun", "srun",
              "torch.distributed.run", "torch.distributed.launch", "bash", "sh"}
_LAUNCH_MODULES = {"torch.distributed.run", "torch.distributed.launch"}


@dataclass
class Setting:
    name: str                 # canonical
    raw_name: str             # as written
    value: str                # normalised text
    source: str
    explicit: bool = True
    absent_default: str | None = None  # what the framework assumes when the flag is not given
    from_log: str | None = None        # echo kind when the value comes from a training log
    category: str | None = None        # what it governs, when the alias table does not know the key


@dataclass
class RunConfig:
    run: RunDir
    framework: str = "unknown"
    settings: dict[str, Setting] = field(default_factory=dict)
    env: dict[str, str] | None = None        # env listing (None: no usable listing)
    env_sources: list[str] = field(default_factory=list)
    exports: dict[str, str] = field(default_factory=dict)  # exported by launch scripts
    export_sources: list[str] = field(default_factory=list)
    complete: bool = True                     # False when a config file could only be read in part
    has_config: bool = False
    scripts_text: str = ""                    # launch script text (for determinism API calls)
    log_sources: list[str] = field(default_factory=list)   # logs whose echo gave settings
    log_complete: bool = False                # a log printed a full argument dump (defaults included)
    log_versions: dict[str, str] = field(default_factory=dict)  # library versions printed in logs
    log_device: str | None = None             # accelerator the log shows (npu / gpu)
    log_framework: str | None = None          # framework whose echo format the log printed
    packages: dict[str, tuple[str, str]] | None = None  # pip listing (set by the collector)

    @property
    def has_any_config(self) -> bool:
        """Settings are known from a script, a config file or a log echo."""
        return self.has_config or bool(self.log_sources)

    def value(self, name: str) -> str | None:
        s = self.settings.get(name)
        return s.value if s else None

    def effective_env(self) -> dict[str, str]:
        """Listing overlaid with what the launch script exports (the script runs later)."""
        out = dict(self.env or {})
        out.update(self.exports)
        return out

    def has_env(self) -> bool:
        return self.env is not None or bool(self.exports)


def norm_value(value: Any) -> str | None:
    """Settings as comparable text; None for 'not set' (null, empty)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, (list, tuple)):
        return ",".join(v for v in (norm_value(x) for x in value) if v is not None)
    text = " ".join(str(value).split())
    low = text.lower()
    if low in ("", "none", "null", "~"):
        return None
    if low in ("true", "false"):
        return low
    return text.replace(", ", ",")


def build(run: RunDir, warnings: Warnings) -> RunConfig:
    cfg = RunConfig(run=run, framework=detect_framework(run))
    for art in run.files("env"):
        listing = read_env_listing(art.path, warnings)
        if listing is not None:
            cfg.env = {**(cfg.env or {}), **listing}
            cfg.env_sources.append(str(art.path))
    structured = [a for a in run.artefacts if a.kind in ("config.yaml", "config.json", "config.toml")]
    for art in structured:
        fmt = art.kind.split(".", 1)[1]
        try:
            data = load(art.path, fmt)
        except ConfigFileError as exc:
            warnings.add(f"{fmt.upper()} config could not be read ({exc}); its settings are not "
                         "compared", path=str(art.path), line=exc.line)
            cfg.complete = False
            continue
        cfg.has_config = True
        for key, val in flatten(data):
            _put(cfg, key, val, str(art.path))
    for art in run.files("config.launch"):
        _read_launch(cfg, art.path, warnings)
    from precdx.collectors.checklist.logconfig import merge_logs
    merge_logs(cfg, run, warnings)
    if cfg.framework == "unknown" and cfg.log_framework:
        cfg.framework = cfg.log_framework
    elif cfg.framework == "megatron" and cfg.log_framework == "mindspeed":
        cfg.framework = "mindspeed"
    _resolve_deepspeed(cfg, [a.path for a in structured if a.kind == "config.json" and a.detail == "deepspeed"],
                       warnings)
    _derive(cfg)
    return cfg


def _resolve_deepspeed(cfg: RunConfig, ds_files: list[Path], warnings: Warnings) -> None:
    """DeepSpeed under a trainer: 'auto' values take the trainer's arguments (the Hugging Face
    integration fills them in), else the trainer's default; and gradient clipping is DeepSpeed's
    alone (the trainer leaves it to the engine), so `max_grad_norm` without `gradient_clipping`
    in the DeepSpeed config does not clip as configured."""
    from precdx.collectors.checklist import defaults

    for name, s in list(cfg.settings.items()):
        if s.value.lower() != "auto":
            continue
        found = defaults.lookup("hf_trainer", name, _versions(cfg))
        if found and len(found[0]) == 1:
            value = next(iter(found[0]))
            cfg.settings[name] = Setting(name, s.raw_name, value, s.source, explicit=False,
                                         from_log=s.from_log, category=s.category)
        else:
            warnings.add(f"'{s.raw_name}' is 'auto' and nothing sets it; its value is unknown and it is "
                         "not compared", path=s.source)
            del cfg.settings[name]
    if not ds_files:
        return
    clip = cfg.settings.get("clip_grad")
    ds_sources = {str(p) for p in ds_files}
    ds_clips = False
    for p in ds_files:
        try:
            ds_clips = ds_clips or "gradient_clipping" in load(p, "json")
        except ConfigFileError:
            return  # already warned; nothing is known about its clipping
    if clip is not None and not ds_clips and clip.raw_name.lower().lstrip("-") in ("max_grad_norm",
                                                                                  "max-grad-norm"):
        found = defaults.lookup("deepspeed", "clip_grad", _versions(cfg))
        if found is None:
            return
        values, note = found
        where = ", ".join(sorted(ds_sources))
        if len(values) == 1:
            value = next(iter(values))
            warnings.add(f"max_grad_norm={clip.value} is set but the DeepSpeed config has no "
                         f"gradient_clipping: DeepSpeed clips, so the effective value is its default "
                         f"{value} ({note})", path=where)
            cfg.settings["clip_grad"] = Setting("clip_grad", "gradient_clipping", value, where,
                                                explicit=True, category=None)
        else:
            warnings.add(f"max_grad_norm={clip.value} is set but the DeepSpeed config has no "
                         "gradient_clipping: DeepSpeed clips with its own default (0.0, i.e. off, before "
                         "0.19.3; 1.0 from 0.19.3); the DeepSpeed version is unknown", path=where)


def _versions(cfg: RunConfig) -> dict[str, str]:
    """Library versions known for the run: pip listings first, then what its logs print."""
    from precdx.collectors.checklist.libraries import read_listing

    out = dict(cfg.log_versions)
    for art in cfg.run.files("pip"):
        listing = read_listing(art.path, Warnings())
        if listing:
            out.update({k: v for k, (v, _) in listing.items()})
    return out


def _read_launch(cfg: RunConfig, path: Path, warnings: Warnings) -> None:
    try:
        raw = path.read_bytes()[:MAX_SCRIPT_BYTES]
    except OSError as exc:
        warnings.add(f"cannot read launch script: {exc.strerror or exc}", path=str(path))
        cfg.complete = False
        return
    if b"\x00" in raw[:8192]:
        warnings.add("launch script is binary, not shell text; its settings are not compared", path=str(path))
        cfg.complete = False
        return
    text = raw.decode("utf-8", errors="replace")
    script = read_script(text, cfg.env)
    cfg.scripts_text += text + "\n"
    if isinstance(script.error, ShellLimitError):
        warnings.add(f"launch script not read to its end ({script.error}); only the part before "
                     f"line {script.error.line} was used", path=str(path), line=script.error.line)
        cfg.complete = False
    elif script.error is not None:
        warnings.add(f"launch script is not valid shell ({script.error}); only the part before "
                     f"line {script.error.line} was read", path=str(path), line=script.error.line)
        cfg.complete = False
    cfg.has_config = True
    if script.exports:
        cfg.exports.update(script.exports)
        cfg.export_sources.append(str(path))
    for cmd in script.commands:
        cfg.exports.update({k: v for k, v in cmd.env.items()})
    launch = _training_command(script)
    if launch is None:
        args = _args_from_variables(script)
        if args:
            _warn_substitutions(args, path, warnings)
            _put_args(cfg, args, str(path))
        return
    before, after = launch
    _warn_substitutions(before + after, path, warnings)
    _put_args(cfg, before, str(path), launcher=True)
    _put_args(cfg, after, str(path))


_SUBSTITUTION = re.compile(r"\$\((?!\()|`")  # $( but not $(( arithmetic, or a backquote


def _warn_substitutions(argv: list[str], path: Path, warnings: Warnings) -> None:
    """Arguments whose value a command would compute: never run, so compared as written."""
    found = [a for a in argv if _SUBSTITUTION.search(a)]
    if found:
        warnings.add("training arguments come from command substitution ($(...) or `...`); precdx "
                     "never runs commands, so these values are compared as written", path=str(path))


def _training_command(script: ShellScript) -> tuple[list[str], list[str]] | None:
    """(launcher args, training args) of the command that starts training."""
    best: tuple[int, list[str], list[str]] | None = None
    for cmd in script.commands:
        split = _split_command(cmd)
        if split is None:
            continue
        before, after = split
        score = sum(1 for w in after if w.startswith("--"))
        if best is None or score > best[0]:
            best = (score, before, after)
    return (best[1], best[2]) if best else None


def _split_command(cmd: Command) -> tuple[list[str], list[str]] | None:
    argv = cmd.argv
    first = argv[0].rsplit("/", 1)[-1]
    if first.endswith(".py"):
        return [], argv[1:]
    if first not in _LAUNCHERS and not first.startswith("python"):
        return None
    i = 1
    while i < len(argv):
        word = argv[i]
        if word == "-m" and i + 1 < len(argv):
            module = argv[i + 1]
            if module not in _LAUNCH_MODULES:
                return argv[1:i], argv[i + 2:]
            i += 2
            continue
        if word.endswith(".py") and not word.startswith("-"):
            return argv[1:i], argv[i + 1:]
        i += 1
    return None


def _args_from_variables(script: ShellScript) -> list[str]:
    """No launch command found: the *_ARGS variables still carry the settings."""
    out: list[str] = []
    for name, value in script.variables.items():
        if name.upper().endswith("ARGS") and name.upper() not in ("DISTRIBUTED_ARGS",):
            text = value if isinstance(value, str) else " ".join(value)
            out.extend(text.split())
    return out


def _put_args(cfg: RunConfig, argv: list[str], source: str, launcher: bool = False) -> None:
    i = 0
    while i < len(argv):
        word = argv[i]
        if not word.startswith("-") or word in ("-", "--") or _is_number(word):
            i += 1
            continue
        if "=" in word and word.startswith("--"):
            name, value = word.split("=", 1)
            _put_arg(cfg, name, value, source, launcher, bare=False)
            i += 1
            continue
        values = []
        j = i + 1
        while j < len(argv) and (not argv[j].startswith("-") or _is_number(argv[j])):
            values.append(argv[j])
            j += 1
        if values:
            _put_arg(cfg, word, " ".join(values), source, launcher, bare=False)
        else:
            _put_arg(cfg, word, "true", source, launcher, bare=True)
        i = j


def _is_number(word: str) -> bool:
    try:
        float(word)
    except ValueError:
        return False
    return True


def _put_arg(cfg: RunConfig, raw: str, value: str, source: str, launcher: bool, bare: bool) -> None:
    norm = aliases.normalise(raw)
    if launcher and norm not in ("nproc_per_node", "nnodes", "num_gpus", "num_nodes", "node_rank",
                                 "master_addr", "master_port"):
        return  # other launcher options (rdzv, log dirs) say nothing about training
    absent_default = None
    if bare:
        negated = (norm.startswith("no_") and norm not in aliases.NO_PREFIX_KEPT
                   and norm not in aliases.NEGATIVE_FLAGS)
        if negated:
            canon, inverted = aliases.canonical(norm[3:])
            value = "false" if not inverted else "true"
            absent_default = "true" if not inverted else "false"
            _store(cfg, Setting(canon, raw, value, source, absent_default=absent_default))
            return
        absent_default = "false"
    _put(cfg, raw, value, source, absent_default=absent_default)


def _put(cfg: RunConfig, raw: str, value: Any, source: str, absent_default: str | None = None) -> None:
    text = norm_value(value)
    canon, inverted = aliases.canonical(str(raw))
    if text is None:
        return
    if inverted and text in ("true", "false"):
        text = "false" if text == "true" else "true"
        if absent_default in ("true", "false"):
            absent_default = "false" if absent_default == "true" else "true"
    _store(cfg, Setting(canon, str(raw), text, source, absent_default=absent_default))


def _store(cfg: RunConfig, setting: Setting) -> None:
    # later sources win: command-line arguments are read after config files, as frameworks do;
    # DeepSpeed's "auto" never overrides a value another file gives (the trainer fills it in)
    old = cfg.settings.get(setting.name)
    if old is not None and setting.value.lower() == "auto" and old.value.lower() != "auto":
        return
    cfg.settings[setting.name] = setting


def _num(cfg: RunConfig, name: str) -> float | None:
    v = cfg.value(name)
    if v is None:
        return None
    try:
        return float(v)
    except ValueError:
        return None


def _derive(cfg: RunConfig) -> None:
    """World size, data-parallel size, global batch and accumulation steps where implied."""
    def put(name: str, value: float) -> None:
        if name not in cfg.settings and value > 0 and float(value).is_integer():
            cfg.settings[name] = Setting(name, name, str(int(value)), "derived", explicit=False)

    nproc, nnodes = _num(cfg, "nproc_per_node"), _num(cfg, "nnodes") or 1.0
    if nproc:
        put("world_size", nproc * nnodes)
    world = _num(cfg, "world_size")
    tp = _num(cfg, "tensor_model_parallel_size") or 1.0
    pp = _num(cfg, "pipeline_model_parallel_size") or 1.0
    cp = _num(cfg, "context_parallel_size") or 1.0
    if world and world % (tp * pp * cp) == 0:
        put("data_parallel_size", world / (tp * pp * cp))
    dp = _num(cfg, "data_parallel_size")
    mbs, gas, gbs = (_num(cfg, "micro_batch_size"), _num(cfg, "gradient_accumulation_steps"),
                     _num(cfg, "global_batch_size"))
    if mbs and dp:
        if gbs is None:
            put("global_batch_size", mbs * (gas or 1.0) * dp)
        elif gas is None and gbs % (mbs * dp) == 0:
            put("gradient_accumulation_steps", gbs / (mbs * dp))
