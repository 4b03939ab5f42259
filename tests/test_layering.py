"""Package layering of engine/: every import (module level, inside functions, under
TYPE_CHECKING) goes from a higher layer to a lower one, so there are no import cycles between
engine's modules and subpackages. Lazy imports (inside a function, for start-up time) are fine,
but only downward too. Units in one layer do not import each other.

A unit is a top-level module of engine/ (engine/diagnosis.py -> "diagnosis"), a subpackage
(engine/rulepack/ -> "rulepack"), or a collector area (engine/collectors/logs/ ->
"collectors.logs"; engine/collectors/base.py and __init__.py are "collectors"). Imports inside
one unit are not checked. The collector registry (`precdx.collectors.all_collectors`, `reads_of`)
finds its collectors with importlib by name: a plugin lookup, not an import of a known module.
"""
from __future__ import annotations

import ast
import functools
from collections import defaultdict
from pathlib import Path

ENGINE = Path(__file__).resolve().parents[1] / "engine"  # the source folder (layout name)
PACKAGE = "precdx"  # its import name (pyproject maps the folder; tests/test_package_name.py)

# Bottom first. A unit may import its own modules and units of lower layers only.
LAYERS: list[tuple[str, set[str]]] = [
    ("foundation", {PACKAGE, "errors", "paths", "progress", "compression"}),
    ("shared vocabulary, safe YAML, on-disk cache", {"vocabulary", "yamlsafe", "cache"}),
    ("facts, knowledge base", {"facts", "kb"}),
    ("failure-mode catalogue, collector interface", {"modes", "collectors"}),
    ("training logs", {"collectors.logs"}),
    ("tracking curves, msprobe artefacts", {"collectors.tracking", "collectors.msprobe"}),
    ("checklist: configs, environment, run facts", {"collectors.checklist"}),
    ("discovery, declared experiments", {"discovery", "experiments"}),
    ("pipeline (discover, collect), inspection", {"pipeline", "inspection"}),
    ("rule pack: schema, loader, compiled IR, lint, test cases", {"rulepack"}),
    ("matchers", {"matching"}),
    ("ranking, differential", {"ranking", "differential"}),
    ("diagnosis", {"diagnosis"}),
    ("views of a diagnosis and of the rule pack", {"render", "explain", "rulerunner", "audit"}),
    ("planner", {"planner"}),
    ("the diagnose API; the training-side probe", {"api", "probe"}),
    ("watch", {"watch"}),
    ("interfaces", {"service", "mcp", "demo"}),
    ("command line", {"cli"}),
]

# Reviewed upward imports: (importer, imported) -> why it stays for now. Keep this short.
ALLOWED_UPWARD: dict[tuple[str, str], str] = {
    ("collectors.logs", "collectors.tracking"):
        "collectors/logs/runs.py asks the tracking area for a run's curve when no text log has one "
        "(a lazy import), while the tracking readers build the logs area's step series. Breaking it "
        "means moving that fallback (or the series model) out of engine/collectors/logs/, which "
        "another worker owns during issue 15.",
}

LAYER_OF = {unit: i for i, (_, units) in enumerate(LAYERS) for unit in units}


def _module_name(path: Path) -> str:
    parts = [PACKAGE, *path.relative_to(ENGINE).with_suffix("").parts]
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _exists(module: str) -> bool:
    p = ENGINE.joinpath(*module.split(".")[1:])
    return p.with_suffix(".py").is_file() or (p / "__init__.py").is_file()


def unit_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != PACKAGE:
        return None
    if len(parts) == 1:
        return PACKAGE
    if parts[1] == "collectors" and len(parts) > 2 and parts[2] != "base":
        return f"collectors.{parts[2]}"
    return parts[1]


def imports_of(path: Path, module: str | None = None) -> list[tuple[str, int]]:
    """(imported engine module, line) for every import statement of the file (whose module
    name is `module`, by default the one its place under engine/ gives)."""
    module = module or _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out.extend((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:  # `from precdx import discovery` imports the module discovery
                sub = f"{target}.{alias.name}"
                out.append((sub if _exists(sub) else target, node.lineno))
    return [(m, line) for m, line in out if m == PACKAGE or m.startswith(f"{PACKAGE}.")]


@functools.lru_cache(maxsize=1)
def engine_edges() -> dict[tuple[str, str], list[str]]:
    edges: dict[tuple[str, str], list[str]] = defaultdict(list)
    for path in sorted(ENGINE.rglob("*.py")):
        src = unit_of(_module_name(path))
        for target, line in imports_of(path):
            dst = unit_of(target)
            if dst is not None and dst != src:
                edges[(src, dst)].append(f"{path.relative_to(ENGINE.parent)}:{line}")
    return edges


def test_every_unit_has_a_layer():
    units = {unit_of(_module_name(p)) for p in ENGINE.rglob("*.py")}
    missing = sorted(units - set(LAYER_OF))
    assert not missing, f"place these in LAYERS of tests/test_layering.py: {missing}"
    listed = [u for _, units in LAYERS for u in units]
    assert len(listed) == len(set(listed)), "a unit is listed in two layers"
    assert not sorted(set(LAYER_OF) - units), "LAYERS names units that do not exist"


def test_imports_only_go_down():
    upward = []
    for (src, dst), where in sorted(engine_edges().items()):
        if LAYER_OF[dst] >= LAYER_OF[src] and (src, dst) not in ALLOWED_UPWARD:
            how = "imports a unit of its own layer" if LAYER_OF[dst] == LAYER_OF[src] else "imports upward"
            upward.append(f"{src} ({LAYERS[LAYER_OF[src]][0]}) {how}: {dst} "
                          f"({LAYERS[LAYER_OF[dst]][0]}) at {', '.join(where)}")
    assert not upward, "layering broken:\n  " + "\n  ".join(upward)


def test_allowed_upward_imports_are_still_needed():
    edges = engine_edges()
    for (src, dst), why in ALLOWED_UPWARD.items():
        assert why.strip()
        assert LAYER_OF[dst] >= LAYER_OF[src], f"{src} -> {dst} is downward now: drop it from ALLOWED_UPWARD"
        assert (src, dst) in edges, f"{src} no longer imports {dst}: drop it from ALLOWED_UPWARD"


def test_the_checker_sees_lazy_relative_and_package_imports(tmp_path):
    """The parser finds imports inside functions and under TYPE_CHECKING, resolves relative
    imports, and `from precdx import X` to the module X (so the test above can fail)."""
    probe = tmp_path / "probe.py"
    probe.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..api import gather\n"
                     "def f():\n    from precdx import service\n    import precdx.cli\n    from . import text\n")
    found = [m for m, _ in imports_of(probe, "precdx.render.probe")]
    assert found == ["precdx.api", "precdx.service", "precdx.cli", "precdx.render.text"]
    assert [unit_of(m) for m in found] == ["api", "service", "cli", "render"]
    assert unit_of("precdx.collectors.logs.runs") == "collectors.logs"
    assert unit_of("precdx.collectors.base") == "collectors"
