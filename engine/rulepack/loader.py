"""Load rule files (`rules/**/*.yaml`, test files `*.test.yaml` excluded) into validated
`Rule` models, with file:line on every problem. A file holds one rule (a mapping) or several
(`rules: [...]`, with `schema_version` once at the top; a `schema_version` on each rule, the
older placement, is still read and wins for its rule). Former fact field names are rewritten
to the current ones (engine/rulepack/upgrade.py) and noted on the loaded rule for lint; named
thresholds (`{threshold: NAME}`, `{threshold.NAME}`) become the kb's numbers
(engine/rulepack/thresholds.py)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from precdx.errors import PrecdxError, Warnings
from precdx.paths import rules_dir
from precdx.rulepack.schema import SCHEMA_VERSION, Rule
from precdx.rulepack.thresholds import scope, substitute
from precdx.rulepack.upgrade import upgrade_rule
from precdx.yamlsafe import LineDict, LineList, line_of, load_yaml_file


@dataclass(frozen=True)
class LoadedRule:
    rule: Rule
    path: str
    line: int | None
    doc: Any = None  # the line-aware YAML mapping, for pointing compiler errors at lines
    upgraded: tuple[str, ...] = ()  # former field names rewritten on load ("type.old -> new")

    def line_at(self, *loc: Any) -> int | None:
        return _locate(self.doc, loc) if self.doc is not None else self.line


def _locate(doc: Any, loc: tuple) -> int | None:
    """Walk a pydantic error location through the line-aware YAML tree to the nearest line."""
    node, best = doc, line_of(doc)
    for part in loc:
        if isinstance(node, LineDict):
            key = "as" if part == "alias" and "as" in node else part
            if key in node:
                best = node.key_lines.get(key, best)
                node = node[key]
                continue
            return best
        if isinstance(node, LineList) and isinstance(part, int) and part < len(node):
            node = node[part]
            best = line_of(node) or best
            continue
        return best
    return best


def parse_rule(doc: Any, path: str, *, file_version: Any = None) -> Rule:
    """Validate one rule mapping; `file_version` is the file's top-level schema_version, used
    when the rule does not state its own."""
    if not isinstance(doc, dict):
        raise PrecdxError("a rule must be a mapping", path=path, line=line_of(doc))
    if "schema_version" not in doc and file_version is not None:
        versioned = LineDict(schema_version=file_version, **doc)
        versioned.line = line_of(doc)
        versioned.key_lines = dict(getattr(doc, "key_lines", {}))
        doc = versioned
    version = doc.get("schema_version")
    try:
        return Rule.model_validate(doc)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = tuple(err["loc"])
        where = ".".join(str(x) for x in loc) or "rule"
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = f"unknown key {loc[-1]!r}"
        extra = f" (+{len(exc.errors()) - 1} more)" if len(exc.errors()) > 1 else ""
        rid = doc.get("id", "?")
        raise PrecdxError(f"rule {rid}: {where}: {msg}{extra}", path=path, line=_locate(doc, loc),
                          hint=None if version == SCHEMA_VERSION else f"schema_version is {version!r}") from None


def load_rule_file(path: Path, *, warnings: Warnings | None = None) -> list[LoadedRule]:
    """Rules of one file. With `warnings`, a rule of another schema_version is skipped with a
    warning (the tolerant runtime) instead of failing the whole file."""
    doc = load_yaml_file(str(path))
    if doc is None:
        return []
    file_version = None
    if isinstance(doc, dict) and "rules" in doc and "id" not in doc:
        file_version = doc.get("schema_version")
        extra = set(doc) - {"rules", "schema_version"}
        if extra:
            raise PrecdxError(f"unknown top-level key(s) {sorted(extra)}", path=str(path),
                              line=line_of(doc, sorted(extra)[0]))
        items = doc["rules"]
        if not isinstance(items, list):
            raise PrecdxError("'rules' must be a list", path=str(path), line=line_of(doc, "rules"))
    else:
        items = [doc]
    out = []
    known = scope(path)
    for item in items:
        version = item.get("schema_version", file_version) if isinstance(item, dict) else None
        if warnings is not None and isinstance(item, dict) and version != SCHEMA_VERSION:
            warnings.add(f"rule {item.get('id', '?')} skipped: schema_version {version!r} "
                         f"is not supported (this precdx reads {SCHEMA_VERSION})", path=str(path), line=line_of(item))
            continue
        item, notes = upgrade_rule(item)
        item, _ = substitute(item, path, known)
        rule = parse_rule(item, str(path), file_version=file_version)
        out.append(LoadedRule(rule, str(path), line_of(item), item, tuple(notes)))
    return out


def rule_files(root: Path | None = None) -> list[Path]:
    root = Path(root) if root else rules_dir()
    if root.is_file():
        return [root]
    if not root.is_dir():
        raise PrecdxError("rule directory not found", path=str(root))
    return sorted(p for p in root.rglob("*.yaml") if not p.name.endswith(".test.yaml"))


def load_rules(root: Path | None = None, *, warnings: Warnings | None = None,
               tolerant: bool = False) -> list[LoadedRule]:
    """Load every rule below `root`. Duplicate ids are an error. With `tolerant=True` (the
    runtime), a rule of another schema_version is skipped with a warning instead."""
    loaded: list[LoadedRule] = []
    seen: dict[str, LoadedRule] = {}
    for path in rule_files(root):
        batch = load_rule_file(path, warnings=warnings if tolerant else None)
        for lr in batch:
            names = [lr.rule.id, *lr.rule.aliases]
            for name in names:
                if name in seen:
                    prior = seen[name]
                    raise PrecdxError(f"duplicate rule id {name!r} (also at {prior.path}:{prior.line})",
                                      path=lr.path, line=lr.line)
                seen[name] = lr
            loaded.append(lr)
    return loaded
