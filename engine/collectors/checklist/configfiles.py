"""Reading structured training configs (YAML, JSON, TOML) into flat (dotted key, value) pairs,
with the few value conventions that differ between frameworks (DeepSpeed's betas list and
initial_scale_power) turned into plain settings.
"""
from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any, Iterator

from precdx.errors import PrecdxError
from precdx.yamlsafe import load_yaml_text

MAX_CONFIG_BYTES = 16 * 1024 * 1024
MAX_DEPTH = 64


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
        except (ValueError, RecursionError) as exc:  # 5000-digit integers, [[[[ nesting
            raise ConfigFileError(f"invalid JSON: {_reason(exc)}") from None
    elif fmt == "toml":
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            line = getattr(exc, "lineno", None)
            raise ConfigFileError(f"invalid TOML: {exc}", line) from None
        except (ValueError, RecursionError) as exc:
            raise ConfigFileError(f"invalid TOML: {_reason(exc)}") from None
    else:
        # the strict loader: duplicate keys are an error (PyYAML would keep the last one
        # silently), alias bombs and recursive aliases are refused
        try:
            data = load_yaml_text(text, str(path))
        except PrecdxError as exc:
            raise ConfigFileError(exc.message, exc.line) from None
        if isinstance(data, dict):
            data = _plain(data)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigFileError(f"top level is a {type(data).__name__}, not a mapping of settings")
    if _depth(data) > MAX_DEPTH:
        raise ConfigFileError(f"nested more than {MAX_DEPTH} levels deep; not a training config")
    return data


def _depth(data: Any) -> int:
    """Nesting depth of dicts/lists, without recursion (flatten recurses on it afterwards)."""
    deepest, stack = 0, [(data, 1)]
    while stack:
        node, level = stack.pop()
        deepest = max(deepest, level)
        if level > MAX_DEPTH:
            break
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        stack.extend((c, level + 1) for c in children if isinstance(c, (dict, list)))
    return deepest


def _reason(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    return str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__


def _plain(obj: Any) -> Any:
    """The line-aware containers of the strict loader as plain dicts and lists."""
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_plain(v) for v in obj]
    return obj


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
