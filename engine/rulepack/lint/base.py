"""The lint machinery every check family shares: issue types and issues, what validators see
(the loaded rules, load problems, kb, test cases, compiled rules), the validator base class that
registers each family by class name, and helpers over rule patterns."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
import types
from typing import Annotated, Any, ClassVar, Iterable, Union, get_args, get_origin

from precdx.errors import PrecdxError
from precdx.facts import REGISTRY
from precdx.rulepack.compiler import CompiledRule
from precdx.rulepack.loader import LoadedRule
from precdx.rulepack.ruletest import RuleCase
from precdx.rulepack.schema import Rule
from precdx.yamlsafe import LineDict, LineList, line_of


SEVERITIES = ("error", "warning", "info")
USER_ONLY = frozenset({"user"})


# ------------------------------------------------------------------ issue model
@dataclass(frozen=True)
class IssueType:
    code: str
    name: str
    severity: str
    description: str


ISSUE_TYPES: dict[str, IssueType] = {}


def issue_type(code: str, name: str, severity: str, description: str) -> IssueType:
    if severity not in SEVERITIES:
        raise ValueError(f"bad severity {severity!r}")
    if code in ISSUE_TYPES or any(t.name == name for t in ISSUE_TYPES.values()):
        raise ValueError(f"issue type {code}/{name} declared twice")
    itype = IssueType(code, name, severity, description)
    ISSUE_TYPES[code] = itype
    return itype


@dataclass(frozen=True)
class LintIssue:
    type: IssueType
    message: str
    path: str | None = None
    line: int | None = None
    rule: str | None = None

    @property
    def code(self) -> str:
        return self.type.code

    @property
    def name(self) -> str:
        return self.type.name

    @property
    def severity(self) -> str:
        return self.type.severity

    def as_dict(self) -> dict[str, Any]:
        return {"code": self.code, "name": self.name, "severity": self.severity, "rule": self.rule,
                "path": self.path, "line": self.line, "message": self.message}

    def render(self) -> str:
        where = (self.path or "<rules>") + (f":{self.line}" if self.line else "")
        rule = f" [{self.rule}]" if self.rule else ""
        return f"{where}: {self.severity} {self.code} {self.name}{rule}: {self.message}"


# ------------------------------------------------------------------ what validators see
@dataclass
class RuleEntry:
    """A rule that passed the schema, with its line-aware YAML for pointing at lines."""

    loaded: LoadedRule
    doc: Any

    @property
    def rule(self) -> Rule:
        return self.loaded.rule

    @property
    def id(self) -> str:
        return self.loaded.rule.id

    @property
    def path(self) -> str:
        return self.loaded.path

    def line_at(self, *loc: Any) -> int | None:
        return locate(self.doc, loc) or self.loaded.line


@dataclass
class LoadProblem:
    path: str
    line: int | None
    message: str
    kind: str  # "yaml" | "rule" | "version" | "empty"
    rule: str | None = None


@dataclass
class LintContext:
    root: Path
    rules: list[RuleEntry] = field(default_factory=list)
    problems: list[LoadProblem] = field(default_factory=list)
    kb: dict[str, Any] | None = None
    kb_error: PrecdxError | None = None
    kb_root: Path | None = None
    cases: list[RuleCase] = field(default_factory=list)
    compiled: dict[str, CompiledRule | PrecdxError] = field(default_factory=dict)
    issues: list[LintIssue] = field(default_factory=list)

    def by_name(self) -> dict[str, RuleEntry]:
        """Rules by id and by alias (first one wins; duplicates are a schema error)."""
        out: dict[str, RuleEntry] = {}
        for entry in self.rules:
            for name in (entry.id, *entry.rule.aliases):
                out.setdefault(name, entry)
        return out


def locate(doc: Any, loc: Iterable[Any]) -> int | None:
    """The line of the deepest node of `loc` that the YAML records (e.g. ("when", "all", 0, "where"))."""
    node, best = doc, line_of(doc)
    for part in loc:
        if isinstance(node, LineDict) and part in node:
            best = node.key_lines.get(part, best)
            node = node[part]
        elif isinstance(node, LineList) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
            best = line_of(node) or best
        else:
            break
    return best


# ------------------------------------------------------------------ validator base
VALIDATORS: dict[str, type["Validator"]] = {}


class Validator:
    """One family of checks. Subclasses register themselves by class name."""

    family: ClassVar[str] = ""
    issue_types: ClassVar[tuple[IssueType, ...]] = ()

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        VALIDATORS[cls.__name__] = cls

    def __init__(self, ctx: LintContext) -> None:
        self.ctx = ctx

    def validate(self, entry: RuleEntry) -> list[LintIssue]:
        return []

    def finalize(self) -> list[LintIssue]:
        return []

    def issue(self, itype: IssueType, message: str, entry: RuleEntry | None = None, *loc: Any,
              path: str | None = None, line: int | None = None, rule: str | None = None) -> LintIssue:
        if itype not in self.issue_types:
            raise RuntimeError(f"{type(self).__name__} does not declare {itype.code}")
        if entry is not None:
            return LintIssue(itype, message, entry.path, line or entry.line_at(*loc), rule or entry.id)
        return LintIssue(itype, message, path, line, rule)


# ------------------------------------------------------------------ shared helpers
def pattern_lists(rule: Rule) -> list[tuple[str, int, Any]]:
    """(section, index, pattern) for every pattern of the rule."""
    return [(sec, i, p) for sec in ("all", "any", "none") for i, p in enumerate(getattr(rule.when, sec))]


def default_alias(rule: Rule, section: str, index: int) -> str:
    """The alias the compiler gives an unnamed pattern."""
    if section == "all":
        return f"_p{index}"
    if section == "any":
        return f"_p{len(rule.when.all) + index}"
    return f"_n{index}"


def bound_aliases(rule: Rule) -> dict[str, list[str]]:
    """Aliases bound in every alternative, with the fact type(s) they bind."""
    out = {p.alias or default_alias(rule, "all", i): [p.fact] for i, p in enumerate(rule.when.all)}
    if rule.when.any:
        names = {p.alias or default_alias(rule, "any", j) for j, p in enumerate(rule.when.any)}
        if len(names) == 1:
            out[names.pop()] = [p.fact for p in rule.when.any]
    return out


def is_collectable(fact_type: str) -> bool:
    """Some collector other than a person (`user`) emits this fact type."""
    spec = REGISTRY.get(fact_type)
    return spec is not None and bool(set(spec.collectors) - USER_ONLY)


def rule_fact_needs(rule: Rule) -> tuple[list[str], list[str]]:
    """(types every firing needs, types of which one is needed): the `all` and `any` patterns."""
    needs_all = list(dict.fromkeys(p.fact for p in rule.when.all))
    needs_any = list(dict.fromkeys(p.fact for p in rule.when.any))
    return needs_all, needs_any


def _conds(where: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Field -> {operator: value}, scalars read as `eq`."""
    return {f: (dict(c) if isinstance(c, dict) else {"eq": c}) for f, c in where.items()}


def _is_ref(value: Any) -> bool:
    return isinstance(value, dict)


def _fmt_ops(ops: dict[str, Any]) -> str:
    parts = []
    for op, v in ops.items():
        if _is_ref(v):
            v = v.get("ref")
        parts.append(f"{op} {v!r}" if not isinstance(v, list) else f"{op} {list(v)!r}")
    return ", ".join(parts)


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def always_present(fact_type: str, field_name: str) -> bool:
    """Every fact of this type carries a value here: the field is required, has a default, or
    its type does not admit None (collectors always fill it)."""
    spec = REGISTRY.get(fact_type)
    info = spec.model.model_fields.get(field_name) if spec else None
    if info is None:
        return False
    if info.is_required() or info.default is not None:
        return True
    return not _admits_none(info.annotation)


def _admits_none(annotation: Any) -> bool:
    if annotation is None or annotation is type(None):
        return True
    origin = get_origin(annotation)
    if origin is Annotated:
        return _admits_none(get_args(annotation)[0])
    if origin is Union or origin is types.UnionType:
        return any(_admits_none(a) for a in get_args(annotation))
    return False
