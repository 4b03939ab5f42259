"""Commands are checked, not trusted: every command and every `--flag` or environment variable
written in rules/ and kb/ is checked against what the tools actually accept.

Reference data (engine/rulepack/data/):
  msprobe_cli.json      generated from the installed msprobe by tools/msprobe_cli_snapshot.py
  framework_flags.json  generated from the Megatron-LM / MindSpeed / MindSpeed-LLM / DeepSpeed /
                        transformers parsers by tools/framework_flags_snapshot.py, with the release
                        each flag appeared in and the release that deprecated it
  tools.yaml            flags of the other tools (ascend-dmi, npu-smi, nvidia-smi, dcgmi, ...)
  env_vars.yaml         environment variables with their device and accepted values

`check_command(text)` and `check_text(text)` return findings (kind, message); the lint
validator turns them into issues with file:line.
"""
from __future__ import annotations

import functools
import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

DATA = Path(__file__).resolve().parent / "data"
PLACEHOLDER = re.compile(r"\{[A-Za-z_]\w*\.[A-Za-z_]\w*(?::[^{}]*)?\}")
FLAG = re.compile(r"(?<![\w/.-])--[A-Za-z][\w-]*")
ENV_NAME = re.compile(r"\b((?:HCCL|LCCL|NCCL|CUDA|CUBLAS|ASCEND|INF_NAN|NPU_ASD|ATB|MS_ASCEND|MS_NPU|NVTE|MSPROBE|PYTORCH_NPU|"
                      r"TASK_QUEUE|MULTI_STREAM|CLOSE_MATMUL|NVIDIA_TF32)_[A-Z0-9_]*[A-Z0-9]|PYTHONHASHSEED|DYNAMIC_MONITOR"
                      r"|MONITOR_OUTPUT_DIR)\b")
ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
# shell words that run something else or only move text around: their own flags are not checked
PASSTHROUGH = {"echo", "grep", "sed", "cat", "diff", "head", "tail", "sort", "mkdir", "cp", "ls", "sha256sum", "for", "do",
               "done", "then", "fi", "if", "tee", "awk", "find", "xargs", "cd", "true", "python", "python3", "bash",
               "sh", "torchrun", "deepspeed", "env", "export", "unset", "in"}
TRAINING_SCRIPTS = re.compile(r"(^|/)(train|pretrain\w*|finetune\w*|run_\w+)\.(sh|py)$")
DEPRECATION_WORDS = re.compile(r"deprecat|废弃|older releases|旧版本名", re.I)


@dataclass(frozen=True)
class Finding:
    kind: str       # msprobe, tool, flag, deprecated, env, env_value, in_place, config
    message: str


@functools.lru_cache(maxsize=None)
def msprobe_cli() -> dict[str, Any]:
    return json.loads((DATA / "msprobe_cli.json").read_text(encoding="utf-8"))


@functools.lru_cache(maxsize=None)
def framework_flags() -> dict[str, dict]:
    data = json.loads((DATA / "framework_flags.json").read_text(encoding="utf-8"))
    return {k: v for k, v in data.items() if isinstance(v, dict) and "flags" in v}


@functools.lru_cache(maxsize=None)
def tools() -> dict[str, dict]:
    return yaml.safe_load((DATA / "tools.yaml").read_text(encoding="utf-8"))


@functools.lru_cache(maxsize=None)
def env_vars() -> dict[str, dict]:
    return yaml.safe_load((DATA / "env_vars.yaml").read_text(encoding="utf-8"))


@functools.lru_cache(maxsize=None)
def _msprobe_flags() -> set[str]:
    return {f for opts in msprobe_cli()["subcommands"].values() for o in opts for f in o["flags"]}


@functools.lru_cache(maxsize=None)
def _tool_flags() -> set[str]:
    return {f for spec in tools().values() for f in spec.get("flags", []) if f.startswith("-")}


def framework_flag(flag: str) -> list[tuple[str, dict]]:
    """(framework, entry) for every framework that knows `flag`."""
    return [(fw, data["flags"][flag]) for fw, data in framework_flags().items() if flag in data["flags"]]


def _fill_placeholders(text: str) -> str:
    return PLACEHOLDER.sub("1", text)


# ------------------------------------------------------------------ free text
def check_text(text: str) -> list[Finding]:
    """`--flags` and environment variable names mentioned in prose."""
    out: list[Finding] = []
    text = _fill_placeholders(text)
    for flag in dict.fromkeys(FLAG.findall(text)):
        out += _check_flag(flag, text, in_command=False)
    for name in dict.fromkeys(ENV_NAME.findall(text)):
        if name not in env_vars():
            out.append(Finding("env", f"unknown environment variable {name} (not in engine/rulepack/data/env_vars.yaml)"))
    return out


def _check_flag(flag: str, context: str, in_command: bool) -> list[Finding]:
    known = framework_flag(flag)
    if known:
        live = [(fw, e) for fw, e in known if not e.get("deprecated_since") and not e.get("removed_after")]
        if live:
            return []
        if DEPRECATION_WORDS.search(context):
            return []  # the text itself says it is deprecated
        fw, e = known[0]
        when = (f"deprecated since {fw} {e['deprecated_since']}" if e.get("deprecated_since")
                else f"last seen in {fw} {e['removed_after']}")
        return [Finding("deprecated", f"{flag} is {when}")]
    if not in_command and (flag in _msprobe_flags() or flag in _tool_flags()):
        return []
    return [Finding("flag", f"unknown flag {flag}: no Megatron, MindSpeed, MindSpeed-LLM, DeepSpeed or HF Trainer "
                            f"release declares it" + ("" if in_command else " (nor msprobe or a listed tool)"))]


# ------------------------------------------------------------------ commands
def _segments(command: str) -> list[list[str]]:
    """Simple commands of a shell line (split on ; && || | and newlines), comments dropped."""
    lex = shlex.shlex(command, posix=True, punctuation_chars=";&|")
    lex.whitespace_split = True
    lex.commenters = "#"
    segments, cur = [], []
    try:
        for tok in lex:
            if tok and set(tok) <= set(";&|"):
                if cur:
                    segments.append(cur)
                cur = []
            else:
                cur.append(tok)
    except ValueError:
        return [command.split()]
    if cur:
        segments.append(cur)
    return segments


def check_command(command: str, context: str = "") -> list[Finding]:
    text = _fill_placeholders(command)
    stripped = text.lstrip()
    if stripped.startswith(("from ", "import ")):
        return []  # Python lines for the training script (seed_all, hooks): not a shell command
    out: list[Finding] = []
    for words in _segments(text):
        out += _check_segment(words, context + " " + command)
    return out


def _check_segment(words: list[str], context: str) -> list[Finding]:
    out: list[Finding] = []
    i = 0
    # leading VAR=value assignments, export/unset/env -u
    while i < len(words):
        w = words[i]
        m = ASSIGN.match(w)
        if m:
            out += _check_env(m.group(1), m.group(2), assigned=True)
            i += 1
            continue
        if w in ("export", "unset"):
            for arg in words[i + 1:]:
                m = ASSIGN.match(arg)
                if m:
                    out += _check_env(m.group(1), m.group(2), assigned=True)
                elif re.fullmatch(r"[A-Za-z_]\w*", arg):
                    out += _check_env(arg, None, assigned=False)
            return out
        if w == "env":
            i += 1
            while i < len(words) and (words[i] == "-u" or ASSIGN.match(words[i])):
                if words[i] == "-u" and i + 1 < len(words):
                    out += _check_env(words[i + 1], None, assigned=False)
                    i += 2
                else:
                    m = ASSIGN.match(words[i])
                    out += _check_env(m.group(1), m.group(2), assigned=True)
                    i += 1
            continue
        break
    if i >= len(words):
        return out
    tool, args = words[i], words[i + 1:]
    name = Path(tool).name
    if name in ("sed", "perl") and any(a == "-i" or a.startswith("-i") and name == "sed" or a.startswith("-pi")
                                       for a in args):
        out.append(Finding("in_place", f"`{name} -i` edits a file in place: write a copy into a new run folder "
                                       "(target_rerun/, baseline_rerun/) so the original evidence stays"))
    if name == "msprobe":
        out += _check_msprobe(args)
    elif name in tools():
        out += _check_tool(name, args)
    elif name == "echo":
        out += _check_echo_config(args)
    elif name in ("bash", "sh", "python", "python3", "torchrun") and args and TRAINING_SCRIPTS.search(args[0]):
        for a in args[1:]:
            if a.startswith("--"):
                out += _check_flag(a.split("=", 1)[0], context, in_command=True)
    return out


def _check_env(name: str, value: str | None, assigned: bool) -> list[Finding]:
    spec = env_vars().get(name)
    if spec is None:
        if ENV_NAME.fullmatch(name):
            return [Finding("env", f"unknown environment variable {name} (not in engine/rulepack/data/env_vars.yaml)")]
        return []
    out = []
    if assigned and spec.get("documented") is False:
        out.append(Finding("env", f"{name} is not a documented variable ({spec.get('source')}); do not set it"))
    if assigned and value is not None and spec.get("values") not in (None, "any"):
        allowed = spec["values"]
        ok = value in allowed if isinstance(allowed, list) else re.fullmatch(allowed, value) is not None
        if not ok:
            out.append(Finding("env_value", f"{name}={value} is not an accepted value "
                                            f"({allowed if isinstance(allowed, list) else 'pattern ' + allowed})"))
    return out


def _check_msprobe(args: list[str]) -> list[Finding]:
    subs = msprobe_cli()["subcommands"]
    version = msprobe_cli().get("version", "?")
    if not args:
        return []
    sub = args[0]
    if sub not in subs:
        return [Finding("msprobe", f"msprobe {version} has no sub-command {sub!r} (one of {', '.join(sorted(subs))})")]
    opts = {f: o for o in subs[sub] for f in o["flags"]}
    out = []
    k = 1
    while k < len(args):
        a = args[k]
        if a.startswith("-") and not re.fullmatch(r"-?\d+(\.\d+)?", a):
            flag = a.split("=", 1)[0]
            o = opts.get(flag)
            if o is None:
                out.append(Finding("msprobe", f"msprobe {sub} ({version}) has no option {flag}"))
            elif o.get("choices") and k + 1 < len(args) and not args[k + 1].startswith("-"):
                if args[k + 1] not in o["choices"]:
                    out.append(Finding("msprobe", f"msprobe {sub} {flag} takes one of {o['choices']}, not {args[k + 1]!r}"))
        k += 1
    return out


def _check_tool(name: str, args: list[str]) -> list[Finding]:
    spec = tools()[name]
    flags = set(spec.get("flags", []))
    values = spec.get("values", {})
    out = []
    for k, a in enumerate(args):
        if not a.startswith("-") or re.fullmatch(r"-?\d+", a):
            continue
        flag, _, inline = a.partition("=")
        if flag not in flags:
            out.append(Finding("tool", f"{name} has no option {flag} ({spec.get('source')})"))
            continue
        if flag in values:
            val = inline or (args[k + 1] if k + 1 < len(args) else "")
            for part in val.split(","):
                if part and part not in values[flag]:
                    out.append(Finding("tool", f"{name} {flag} does not take {part!r} (one of {values[flag]})"))
    if name == "ascend-dmi":
        out += _check_dmi(args, spec)
    return out


def _check_dmi(args: list[str], spec: dict) -> list[Finding]:
    out = []
    diag = any(a in ("-dg", "--dg", "--diagnosis") for a in args)
    for k, a in enumerate(args):
        if a in ("-i", "--items") and diag and k + 1 < len(args):
            items = args[k + 1].split(",")
            unknown = [i for i in items if i not in spec["diagnosis_items"]]
            if unknown:
                out.append(Finding("tool", f"ascend-dmi --dg -i: {', '.join(unknown)} is not a diagnosis item"))
            exclusive = [i for i in items if i in spec["exclusive_items"]]
            if exclusive and len(items) > 1:
                out.append(Finding("tool", f"ascend-dmi --dg -i: {', '.join(exclusive)} cannot be combined with other "
                                           "diagnosis items"))
        if a == "-sc" and k + 1 < len(args):
            lo, hi = spec["stress_count_range"]
            if not (args[k + 1].isdigit() and lo <= int(args[k + 1]) <= hi):
                out.append(Finding("tool", f"ascend-dmi -sc takes {lo}..{hi}, not {args[k + 1]!r}"))
            if "-s" not in args and "--stress" not in args:
                out.append(Finding("tool", "ascend-dmi -sc only applies to a stress test (-s)"))
        if a in ("-se", "--se", "--scene") and k + 1 < len(args):
            bad = [s for s in args[k + 1].split(",") if s not in spec["scenes"]]
            if bad:
                out.append(Finding("tool", f"ascend-dmi --scene does not know {', '.join(bad)}"))
    return out


def _check_echo_config(args: list[str]) -> list[Finding]:
    """`echo '{...}' > msprobe_config.json`: the msprobe PrecisionDebugger config keys and values."""
    raw = next((a for a in args if a.lstrip().startswith("{")), None)
    if raw is None:
        return []
    try:
        cfg = json.loads(raw)
    except ValueError:
        return [Finding("config", f"the msprobe config is not valid JSON: {raw[:60]}")]
    if not isinstance(cfg, dict) or not ({"task", "level", "dump_path"} & set(cfg)):
        return []
    keys = msprobe_cli()["config_keys"]
    version = msprobe_cli().get("version", "?")
    out = []
    tasks = set(keys["task_names"])
    for k, v in cfg.items():
        if k in tasks:
            if isinstance(v, dict):
                for tk, tv in v.items():
                    if tk not in keys["task"]:
                        out.append(Finding("config", f"msprobe {version} task section {k!r} has no key {tk!r}"))
                    elif tk == "summary_mode" and tv not in keys["summary_modes"]:
                        out.append(Finding("config", f"summary_mode {tv!r} is not one of {keys['summary_modes']}"))
        elif k not in keys["common"]:
            out.append(Finding("config", f"msprobe {version} config has no key {k!r}"))
    if "task" in cfg and cfg["task"] not in tasks:
        out.append(Finding("config", f"msprobe {version} has no task {cfg['task']!r} (one of {sorted(tasks)}); "
                                     "overflow checks use the CLI: msprobe overflow_check -i <step dir> -o <out>"))
    if "level" in cfg and cfg["level"] not in keys["levels"]:
        out.append(Finding("config", f"level {cfg['level']!r} is not one of {keys['levels']}"))
    if "risk_level" in cfg and cfg["risk_level"] not in keys["risk_levels"]:
        out.append(Finding("config", f"risk_level {cfg['risk_level']!r} is not one of {keys['risk_levels']}"))
    return out
