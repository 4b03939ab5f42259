"""The lint driver: load every rule file on its own, build the context, run the validators, render."""
from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Iterable

from precdx.errors import PrecdxError
from precdx.paths import rules_dir
from precdx.rulepack.compiler import compile_rule
from precdx.rulepack.lint.base import (
    ISSUE_TYPES, LintContext, LintIssue, LoadProblem, RuleEntry, SEVERITIES, VALIDATORS,
)
from precdx.rulepack.loader import LoadedRule, parse_rule, rule_files
from precdx.rulepack.ruletest import load_cases
from precdx.rulepack.thresholds import substitute
from precdx.rulepack.upgrade import upgrade_rule
from precdx.yamlsafe import line_of, load_yaml_file


def _load(root: Path, ctx: LintContext) -> None:
    for path in rule_files(root):
        spath = str(path)
        try:
            doc = load_yaml_file(spath)
        except PrecdxError as exc:
            ctx.problems.append(LoadProblem(exc.path or spath, exc.line, exc.message, "yaml"))
            continue
        if doc is None:
            ctx.problems.append(LoadProblem(spath, 1, "the file holds no rule", "empty"))
            continue
        file_version = None
        if isinstance(doc, dict) and "rules" in doc and "id" not in doc:
            file_version = doc.get("schema_version")
            extra = sorted(set(doc) - {"rules", "schema_version"})
            if extra:
                ctx.problems.append(LoadProblem(spath, line_of(doc, extra[0]),
                                                f"unknown top-level key(s) {extra}", "rule"))
                continue
            items = doc["rules"]
            if not isinstance(items, list):
                ctx.problems.append(LoadProblem(spath, line_of(doc, "rules"), "'rules' must be a list", "rule"))
                continue
        else:
            items = [doc]
        for item in items:
            notes: list[str] = []
            try:
                item, notes = upgrade_rule(item)
                item, _ = substitute(item, spath)
                rule = parse_rule(item, spath, file_version=file_version)
            except PrecdxError as exc:
                kind = "version" if "schema_version" in exc.message else "rule"
                rid = item.get("id") if isinstance(item, dict) and isinstance(item.get("id"), str) else None
                ctx.problems.append(LoadProblem(exc.path or spath, exc.line, exc.message
                                                + (f" ({exc.hint})" if exc.hint else ""), kind, rid))
                continue
            loaded = LoadedRule(rule, spath, line_of(item), item, tuple(notes))
            ctx.rules.append(RuleEntry(loaded, item))


def build_context(rules_path: str | Path | None = None, *, kb_path: str | Path | None = None) -> LintContext:
    from precdx.kb import load_kb

    root = Path(rules_path) if rules_path else rules_dir()
    ctx = LintContext(root=root)
    _load(root, ctx)
    try:
        ctx.kb = load_kb(kb_path)
    except PrecdxError as exc:
        ctx.kb_error = exc
    if kb_path is not None:
        ctx.kb_root = Path(kb_path)
    ctx.cases = load_cases(root)
    for entry in ctx.rules:
        try:
            ctx.compiled[entry.id] = compile_rule(entry.loaded, [], None)
        except PrecdxError as exc:
            ctx.compiled[entry.id] = exc
    return ctx


_RANK = {s: i for i, s in enumerate(SEVERITIES)}


def lint(rules_path: str | Path | None = None, *, kb_path: str | Path | None = None,
         validators: Iterable[str] | None = None) -> list[LintIssue]:
    """Every issue of the rule pack at `rules_path` (the packaged pack when None), sorted by
    file, line and severity. `validators` picks validator classes by name (all by default)."""
    ctx = build_context(rules_path, kb_path=kb_path)
    names = list(validators) if validators is not None else list(VALIDATORS)
    unknown = [n for n in names if n not in VALIDATORS]
    if unknown:
        raise PrecdxError(f"unknown validator(s) {unknown}", hint="choose from " + ", ".join(VALIDATORS))
    active = [VALIDATORS[n](ctx) for n in names]
    for entry in ctx.rules:
        for v in active:
            ctx.issues.extend(v.validate(entry))
    for v in active:
        ctx.issues.extend(v.finalize())
    unique = list(dict.fromkeys(ctx.issues))
    return sorted(unique, key=lambda i: (i.path or "", i.line or 0, _RANK[i.severity], i.code, i.message))


def render_lint(issues: list[LintIssue]) -> str:
    counts = Counter(i.severity for i in issues)
    lines = [i.render() for i in issues]
    summary = ", ".join(f"{counts[s]} {s}{'s' if s != 'info' and counts[s] != 1 else ''}" for s in SEVERITIES)
    lines.append(("rule pack is clean: " if not issues else "") + summary)
    return "\n".join(lines) + "\n"


def describe_issue_types() -> str:
    """One line per issue type: code, name, severity, description (docs and `--help` text)."""
    return "\n".join(f"{t.code} {t.name:<28} {t.severity:<8} {t.description}" for t in ISSUE_TYPES.values())
