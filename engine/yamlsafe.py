"""Strict, safe YAML loading for rules, kb entries and fact files.

Safe-loader class only (no tags that build objects), duplicate keys rejected with file:line,
alias expansion bounded (billion-laughs), and mappings that remember where each key stood so
schema errors can point at a line.
"""
from __future__ import annotations

import functools
import re
from typing import Any

from precdx.errors import PrecdxError

MAX_ALIASES = 200
MAX_NODES = 1_000_000


class LineDict(dict):
    """A dict that knows the line of each key (1-based) and of itself."""

    line: int | None = None
    key_lines: dict

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self.key_lines = {}


class LineList(list):
    line: int | None = None


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> LineDict:
    # Keys written in this mapping, as opposed to keys brought in by a merge (`<<: *base`), which
    # flatten_mapping puts first and which later keys may override, as YAML merges mean.
    written = {id(k) for k, _ in node.value}
    loader.flatten_mapping(node)
    out = LineDict()
    out.line = node.start_mark.line + 1
    key_nodes: dict = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            hash(key)
        except TypeError:
            raise PrecdxError("unhashable mapping key", path=loader._path, line=key_node.start_mark.line + 1) from None
        if key in out and id(key_nodes[key]) not in written:
            pass  # overrides a merged key
        elif key in out:
            raise PrecdxError(f"duplicate key {key!r} (first at line {out.key_lines[key]})",
                              path=loader._path, line=key_node.start_mark.line + 1)
        out[key] = loader.construct_object(value_node, deep=True)
        out.key_lines[key] = key_node.start_mark.line + 1
        key_nodes[key] = key_node
    return out


def _construct_sequence(loader: _StrictLoader, node: yaml.SequenceNode, deep: bool = False) -> LineList:
    out = LineList(loader.construct_object(child, deep=True) for child in node.value)
    out.line = node.start_mark.line + 1
    return out


@functools.lru_cache(maxsize=1)
def _loaders() -> tuple[Any, type, type]:
    """(yaml, the strict loader, the counting loader), made on first use: a call that reads no
    YAML (a cached rule pack and kb, a case without YAML files) does not load PyYAML."""
    import yaml

    try:  # the C loader is ~6x faster; fall back silently when libyaml is absent
        base = yaml.CSafeLoader  # type: ignore[attr-defined]
    except AttributeError:  # pragma: no cover
        base = yaml.SafeLoader

    class _StrictLoader(base):  # type: ignore[misc, valid-type]
        """Fast (C) strict loader."""

        def __init__(self, stream: Any, path: str) -> None:
            super().__init__(stream)
            self._path = path

    class _CountingLoader(yaml.SafeLoader):
        """Pure-Python strict loader that counts aliases and nodes while composing."""
        def __init__(self, stream: Any, path: str) -> None:
            super().__init__(stream)
            self._path = path
            self._aliases = 0
            self._nodes = 0

        def compose_node(self, parent: Any, index: Any) -> Any:  # count aliases: anchor bombs
            if self.check_event(yaml.AliasEvent):
                self._aliases += 1
                if self._aliases > MAX_ALIASES:
                    raise PrecdxError(f"too many YAML aliases (> {MAX_ALIASES}); refusing a possible alias bomb",
                                      path=self._path)
            self._nodes += 1
            if self._nodes > MAX_NODES:
                raise PrecdxError("YAML document too large", path=self._path)
            return super().compose_node(parent, index)

    for cls in (_StrictLoader, _CountingLoader):
        cls.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
        cls.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _construct_sequence)
    return yaml, _StrictLoader, _CountingLoader


def __getattr__(name: str) -> Any:  # the loader classes, for the tests that inspect them
    if name in ("_StrictLoader", "_CountingLoader"):
        return _loaders()[1 if name == "_StrictLoader" else 2]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_ALIAS_TOKEN = re.compile(r"(?:^|[\s\[{,:-])\*[^\s,\]}]+")


def load_yaml_text(text: str, path: str) -> Any:
    """Parse one YAML (or JSON) document strictly; every problem is a PrecdxError with file:line."""
    if "\x00" in text:
        raise PrecdxError("binary content (NUL bytes), not YAML/JSON text", path=path)
    # The C composer does not call back into Python, so aliases are counted on the pure-Python
    # composer whenever the text could hold more of them than allowed (alias bombs).
    many_aliases = len(_ALIAS_TOKEN.findall(text)) > MAX_ALIASES
    yaml, strict, counting = _loaders()
    loader = (counting if many_aliases else strict)(text, path)
    try:
        data = loader.get_single_data()
        # Few aliases can still nest into billions of nodes (9 aliases of 9 aliases of ...):
        # harmless as shared references, but every caller that walks the tree would expand it.
        if "*" in text and _expanded_size(data) > MAX_NODES:
            raise PrecdxError(f"YAML aliases expand to more than {MAX_NODES} nodes; refusing a possible "
                              "alias bomb", path=path)
        return data
    except PrecdxError:
        raise
    except yaml.constructor.ConstructorError as exc:
        line = exc.problem_mark.line + 1 if exc.problem_mark else None
        raise PrecdxError(f"YAML construct not allowed: {exc.problem}", path=path, line=line) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        raise PrecdxError(f"invalid YAML: {exc.problem or exc.context}", path=path, line=line) from None
    except yaml.YAMLError as exc:
        raise PrecdxError(f"invalid YAML: {exc}", path=path) from None
    except RecursionError:
        raise PrecdxError("YAML nested too deeply", path=path) from None
    except (ValueError, OverflowError, IndexError) as exc:  # scalar constructors: 5000-digit ints,
        # 2001-02-30, `!!int ""` (PyYAML indexes the empty string)
        reason = ("an empty value under a type tag such as !!int" if isinstance(exc, IndexError)
                  else str(exc).splitlines()[0][:160])
        raise PrecdxError(f"invalid YAML value: {reason}", path=path) from None
    finally:
        loader.dispose()


def _expanded_size(data: Any) -> int:
    """Number of nodes the tree has once every alias is expanded (shared nodes counted once per
    use; memoised per object, so this costs one pass over the distinct nodes)."""
    sizes: dict[int, int] = {}
    stack: list[tuple[Any, bool]] = [(data, False)]
    while stack:
        node, done = stack.pop()
        if not isinstance(node, (dict, list)) or (id(node) in sizes and not done):
            continue
        children = [c for c in (node.values() if isinstance(node, dict) else node) if isinstance(c, (dict, list))]
        if not done:
            stack.append((node, True))
            stack.extend((c, False) for c in children)
            continue
        total = 1 + len(node)
        for c in children:
            total += sizes.get(id(c), 0)
        sizes[id(node)] = min(total, MAX_NODES + 1)
    return sizes.get(id(data), 1)


def load_yaml_file(path: str) -> Any:
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except FileNotFoundError:
        raise PrecdxError("file not found", path=path) from None
    except OSError as exc:
        raise PrecdxError(f"cannot read: {exc.strerror}", path=path) from None
    if b"\x00" in raw:
        raise PrecdxError("binary content (NUL bytes), not YAML text", path=path)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise PrecdxError("not UTF-8 text (binary file?)", path=path) from None
    return load_yaml_text(text, path)


def line_of(obj: Any, key: Any = None) -> int | None:
    """Line of a mapping key (or of the node itself) when the loader recorded it."""
    if key is not None and isinstance(obj, LineDict):
        return obj.key_lines.get(key, obj.line)
    return getattr(obj, "line", None)
