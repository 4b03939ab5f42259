"""Model structure listings: `print(model)` output (nested `(name): Type(args)` lines) and
parameter name/shape listings, and the modules or parameters that differ between runs."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Iterator

from precdx.collectors.base import RunDir
from precdx.errors import Warnings
from precdx.facts import Fact
from precdx.facts.checklist import StructureDiff, StructureSummary, UNSET

MAX_LISTING_BYTES = 32 * 1024 * 1024
MAX_DIFFS_PER_PAIR = 100

_ROOT = re.compile(r"^([A-Z]\w*)\($")
_CHILD = re.compile(r"^(\s+)\(([\w.-]+)\):\s+(?:(\d+)\s+x\s+)?([A-Za-z_][\w.]*)\((.*)$")
_PARAM = re.compile(r"^\s*([A-Za-z_][\w.]*)\s*[:\t, ]\s*(?:torch\.Size\(\s*)?[\[(]\s*"
                    r"(\d+(?:\s*,\s*\d+)*)\s*,?\s*[\])]")


def read_printed_model(path: Path, warnings: Warnings) -> dict[str, str] | None:
    """module path -> 'Type(args)' (containers as 'Type'; repeated blocks as 'N x Type')."""
    text = _read(path, warnings)
    if text is None:
        return None
    modules: dict[str, str] = {}
    stack: list[tuple[int, str]] = []  # (indent, path)
    started = False
    for line in text.splitlines():
        if not started:
            m = _ROOT.match(line.strip())
            if m and not line.startswith(" "):
                modules[""] = m.group(1)
                started = True
            continue
        m = _CHILD.match(line)
        if not m:
            continue
        indent, name, count, mtype, rest = len(m.group(1)), m.group(2), m.group(3), m.group(4), m.group(5)
        while stack and stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1] if stack else ""
        mpath = f"{parent}.{name}" if parent else name
        desc = f"{count} x {mtype}" if count else mtype
        rest = rest.strip()
        if rest and rest != ")" and not rest.endswith("("):
            desc += "(" + rest  # leaf module with its arguments, e.g. Linear(in_features=...)
        modules[mpath] = desc
        if rest.endswith("(") or rest == "":
            stack.append((indent, mpath))
    if not started or len(modules) < 2:
        warnings.add("printed model has no '(name): Module(' lines; structure not compared", path=str(path))
        return None
    return modules


def read_parameters(path: Path, warnings: Warnings) -> dict[str, str] | None:
    """parameter name -> shape 'AxB' ('module.' wrapper prefixes removed)."""
    text = _read(path, warnings)
    if text is None:
        return None
    params: dict[str, str] = {}
    for line in text.splitlines():
        m = _PARAM.match(line)
        if m:
            name = re.sub(r"^(module\.)+", "", m.group(1))
            params[name] = "x".join(p.strip() for p in m.group(2).split(","))
    if len(params) < 1:
        warnings.add("parameter listing has no 'name shape' lines; structure not compared", path=str(path))
        return None
    return params


def _read(path: Path, warnings: Warnings) -> str | None:
    try:
        raw = path.read_bytes()[:MAX_LISTING_BYTES]
    except OSError as exc:
        warnings.add(f"cannot read model listing: {exc.strerror or exc}", path=str(path))
        return None
    if b"\x00" in raw:
        warnings.add("model listing is binary, not text", path=str(path))
        return None
    return raw.decode("utf-8", errors="replace")


def run_listings(run: RunDir, warnings: Warnings) -> dict[str, tuple[dict[str, str], str]]:
    """listing kind -> (items, source path)."""
    out: dict[str, tuple[dict[str, str], str]] = {}
    for art in run.files("model"):
        if art.kind == "model.print":
            items = read_printed_model(art.path, warnings)
            if items is not None:
                out["printed_model"] = (items, str(art.path))
        elif art.kind == "model.params":
            items = read_parameters(art.path, warnings)
            if items is not None:
                out["parameters"] = (items, str(art.path))
    return out


def summary_facts(run: RunDir, listings: dict[str, tuple[dict[str, str], str]]) -> Iterator[Fact]:
    for kind, (items, source) in listings.items():
        elements = None
        if kind == "parameters":
            elements = 0
            for shape in items.values():
                n = 1
                for dim in shape.split("x"):
                    n *= int(dim)
                elements += n
        yield StructureSummary.of(role=run.role, run=run.name, listing=kind,
                                  modules=len(items), elements=elements, source=source)


def structure_diffs(run: RunDir, mine: dict[str, tuple[dict[str, str], str]], ref: RunDir,
                    theirs: dict[str, tuple[dict[str, str], str]], pair: str,
                    warnings: Warnings) -> Iterator[Fact]:
    emitted = 0
    for kind in ("printed_model", "parameters"):
        if kind not in mine or kind not in theirs:
            continue
        a, src_a = mine[kind]
        b, src_b = theirs[kind]
        item_kind = "module" if kind == "printed_model" else "parameter"
        reported_missing: list[str] = []
        for item in _ordered(a, b):
            if any(item.startswith(p + ".") for p in reported_missing):
                continue  # children of a module present on one side only add nothing
            va, vb = a.get(item), b.get(item)
            if va == vb:
                continue
            if va is None or vb is None:
                change = "only_baseline" if va is None else "only_target"
                reported_missing.append(item)
            elif item_kind == "parameter":
                change = "shape"
            elif _type(va) != _type(vb):
                change = "type"
            else:
                change = "args"
            if emitted >= MAX_DIFFS_PER_PAIR:
                warnings.add(f"more than {MAX_DIFFS_PER_PAIR} structure differences for {pair}; "
                             "only the first are reported", path=src_a)
                return
            emitted += 1
            yield StructureDiff.of(pair=pair, role=run.role, against_role=ref.role,
                                   item=item or "<root>", kind=item_kind, change=change,
                                   baseline=vb if vb is not None else UNSET, target=va if va is not None else UNSET,
                                   source=f"{src_a}, {src_b}")


def _type(desc: str) -> str:
    return desc.split("(", 1)[0]


def _ordered(a: dict[str, str], b: dict[str, str]) -> list[str]:
    """Items in listing order (baseline first, then target-only ones)."""
    seen = dict.fromkeys(b)
    for k in a:
        seen.setdefault(k, None)
    return list(seen)
