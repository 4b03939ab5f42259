"""Reading structured training configs (YAML, JSON, TOML) into flat (dotted key, value) pairs,
with the few value conventions that differ between frameworks (DeepSpeed's betas list and
initial_scale_power) turned into plain settings.
"""
from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any, Iterator

import yaml

MAX_CONFIG_BYTES = 16 * 1024 * 1024


class ConfigFileError(ValueError):
    """A config file that cannot be read; `line` is 1-based when known."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.line = line


def load(path: Path, fmt: str) -> dict[str, Any]:
    """Parse a config file of format yaml | json | toml into a mapping."""
    try:
        raw = path.read_bytes()[:MAX_CONFIG_BYTES]
        text = raw.decode("utf-8-sig")
    except OSError as exc:
        raise ConfigFileError(f"cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ConfigFileError("not UTF-8 text") from None
    if fmt == "json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigFileError(f"invalid JSON: {exc.msg}", exc.lineno) from None
    elif fmt == "toml":
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            line = getattr(exc, "lineno", None)
            raise ConfigFileError(f"invalid TOML: {exc}", line) from None
    else:
        try:
            data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            raise ConfigFileError(f"invalid YAML: {problem}",
                                  mark.line + 1 if mark is not None else None) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigFileError(f"top level is a {type(data).__name__}, not a mapping of settings")
    return data


def flatten(data: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Dotted keys with scalar or list-of-scalar values."""
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            if not value:
                yield name, None
            yield from flatten(value, name + ".")
            continue
        leaf = str(key).lower()
        if isinstance(value, list) and leaf == "betas" and len(value) == 2:
            yield f"{prefix}beta1", value[0]
            yield f"{prefix}beta2", value[1]
            continue
        if leaf == "initial_scale_power" and isinstance(value, (int, float)) and not isinstance(value, bool):
            # DeepSpeed gives the initial loss scale as a power of two
            yield "initial_loss_scale", float(2 ** value)
            continue
        if isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value):
            continue  # lists of tables (e.g. dataset mixtures) are not single settings
        yield name, value
