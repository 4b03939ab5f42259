"""Where an API sits: its module path (construct.json parent chain) and the user code line that
called it (stack.json). Both files are streamed and only the asked-for names are kept."""
from __future__ import annotations

import re
from pathlib import Path

from precdx.collectors.msprobe.jsonstream import NestingTooDeep, stream_kvitems
from precdx.collectors.msprobe.naming import module_path_of, parse_entry_name
from precdx.errors import Warnings

_FRAME = re.compile(r"^File (?P<file>.+?), line (?P<line>\d+), in (?P<func>[^,]+),\s*\n?\s*(?P<src>.*)$", re.S)
# Frames from these places are library internals, not the user's code.
_MAX_CHAIN = 256   # module nesting deeper than this is not a real model
_LIBRARY_MARKERS = ("site-packages", "dist-packages", "/torch/", "/msprobe/", "/torch_npu/",
                    "<frozen", "/lib/python3")


def _forward_twin(api: str) -> str:
    """stack.json only lists forward entries: map a backward name to its forward call."""
    p = parse_entry_name(api)
    if p.direction == "backward" and not p.is_module:
        return f"{p.base}.{p.index}.forward"
    if p.direction == "backward" and p.is_module:
        return f"{p.base}.forward.{p.index}"
    return api


def module_paths(construct: Path | None, apis: list[str], warnings: Warnings) -> dict[str, str]:
    """Nearest enclosing module path for each API (empty when construct.json is missing/{})."""
    if construct is None or not apis:
        return {}
    wanted = set(apis)
    parents: dict[str, str | None] = {}
    try:
        with construct.open("rb") as fh:
            for child, parent in stream_kvitems(fh, ""):
                if child in wanted or child.startswith(("Module.", "Cell.")):
                    parents[child] = parent if isinstance(parent, str) and parent else None
    except NestingTooDeep as exc:
        warnings.add(f"construct.json is {exc}: module paths left out", path=str(construct))
    except Exception as exc:  # damaged construct.json only loses the module paths
        warnings.add(f"construct.json could not be read ({type(exc).__name__}); module paths left out",
                     path=str(construct))
    out: dict[str, str] = {}
    for api in apis:
        node = parents.get(api)
        if node is None and parse_entry_name(api).is_module:
            node = api
        chain: list[str] = [api]
        while node is not None and len(chain) <= _MAX_CHAIN and node not in chain:
            path = module_path_of(node)
            if path:
                out[api] = path
                break
            chain.append(node)
            node = parents.get(node)
    cycle = _find_cycle(parents)
    if cycle is not None:
        shown = " -> ".join(cycle[:6]) + (" -> ..." if len(cycle) > 6 else "")
        warnings.add(f"construct.json has a cycle in its parent map ({shown}); module paths on that "
                     "chain left out", path=str(construct))
    return out


def _find_cycle(parents: dict[str, str | None]) -> list[str] | None:
    """A parent chain of the kept nodes that comes back to itself (a corrupt construct.json:
    a module tree has no cycles), as the list of nodes on it; None when there is none."""
    done: set[str] = set()
    for start in parents:
        if start in done:
            continue
        chain: list[str] = []
        on_chain: dict[str, int] = {}
        node: str | None = start
        while node is not None and node not in done:
            if node in on_chain:
                return chain[on_chain[node]:] + [node]
            on_chain[node] = len(chain)
            chain.append(node)
            node = parents.get(node)
        done.update(chain)
    return None


def user_frame(frames: list) -> str | None:
    parsed = []
    for frame in frames:
        if not isinstance(frame, str):
            continue
        m = _FRAME.match(frame.strip())
        if m:
            parsed.append(m)
    for m in parsed:
        if not any(marker in m["file"] for marker in _LIBRARY_MARKERS):
            return f"{Path(m['file']).name}:{m['line']} {m['src'].strip()}".strip()
    if parsed:
        m = parsed[0]
        return f"{Path(m['file']).name}:{m['line']} {m['src'].strip()}".strip()
    return None


def code_lines(stack: Path | None, apis: list[str], warnings: Warnings) -> dict[str, str]:
    """User code line for each API from stack.json (new grouped or old per-name layout)."""
    if stack is None or not apis:
        return {}
    twin = {api: _forward_twin(api) for api in apis}
    wanted = set(twin.values())
    found: dict[str, str] = {}
    odd, first_odd = 0, None
    try:
        with stack.open("rb") as fh:
            for key, value in stream_kvitems(fh, ""):
                if not isinstance(value, list):
                    odd, first_odd = odd + 1, first_odd or key
                elif len(value) == 2 and isinstance(value[0], list):     # new: {i: [[names], [frames]]}
                    if not isinstance(value[1], list) or not all(isinstance(n, str) for n in value[0]):
                        odd, first_odd = odd + 1, first_odd or key
                    hits = wanted.intersection(n for n in value[0] if isinstance(n, str))
                    if hits and isinstance(value[1], list):
                        line = user_frame(value[1])
                        for h in hits:
                            if line:
                                found[h] = line
                elif not all(isinstance(f, str) for f in value):          # old: {name: [frames]}
                    odd, first_odd = odd + 1, first_odd or key
                elif key in wanted:
                    line = user_frame(value)
                    if line:
                        found[key] = line
                if len(found) == len(wanted):
                    break
    except NestingTooDeep as exc:
        warnings.add(f"stack.json is {exc}: code lines left out", path=str(stack))
    except Exception as exc:
        warnings.add(f"stack.json could not be read ({type(exc).__name__}); code lines left out",
                     path=str(stack))
    if odd:
        warnings.add(f"stack.json has {odd} entry(ies) of an unexpected shape (first: {first_odd!r}); "
                     "they were skipped", path=str(stack))
    return {api: found[t] for api, t in twin.items() if t in found}
