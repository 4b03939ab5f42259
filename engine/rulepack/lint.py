"""Lint the rule pack (`precdx rules lint`), pySigma style: one validator class per check family
(schema, references, quality, logic, compiler), registered by class name; each issue type has a
stable code, a symbolic name, a description and a severity. Validators see each rule
(`validate`) and then the whole pack (`finalize`, for cross-rule checks).

Lint is strict where the runtime is tolerant: it loads every rule file on its own so one broken
file does not hide the others, and it reads the fact vocabulary, the knowledge base and the rule
test cases, never a hand-kept list.
"""
from __future__ import annotations

import json
import math
import re
import types
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, ClassVar, Iterable, Union, get_args, get_origin

from engine.errors import PrecdxError
from engine.facts import REGISTRY, FieldSpec
from engine.paths import rules_dir
from engine.rulepack.compiler import PLACEHOLDER, CompiledRule, compile_rule
from engine.rulepack.loader import LoadedRule, parse_rule, rule_files
from engine.rulepack.ruletest import RuleCase, case_counts, load_cases
from engine.rulepack.schema import OPERATORS, Rule
from engine.yamlsafe import LineDict, LineList, line_of, load_yaml_file

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


# ------------------------------------------------------------------ schema
class SchemaValidator(Validator):
    family = "schema"
    YAML = issue_type("S001", "yaml-invalid", "error",
                      "The file is not strict YAML (syntax error, duplicate key, disallowed tag).")
    INVALID = issue_type("S002", "rule-invalid", "error",
                         "The rule does not fit the rule schema (unknown key, missing field, wrong type).")
    VERSION = issue_type("S003", "schema-version-unsupported", "error",
                         "The rule declares a schema_version this precdx does not read; the runtime skips it.")
    DUPLICATE = issue_type("S004", "duplicate-rule-id", "error",
                           "Two rules (or a rule and an alias) share an id; ids are never reused.")
    EMPTY = issue_type("S005", "empty-rule-file", "warning", "A rule file holds no rule.")
    CASE = issue_type("S006", "test-case-invalid", "error",
                      "A rule test case cannot run (malformed, invalid facts, duplicate case id).")
    issue_types = (YAML, INVALID, VERSION, DUPLICATE, EMPTY, CASE)

    def finalize(self) -> list[LintIssue]:
        kinds = {"yaml": self.YAML, "rule": self.INVALID, "version": self.VERSION, "empty": self.EMPTY}
        out = [self.issue(kinds[p.kind], p.message, path=p.path, line=p.line, rule=p.rule)
               for p in self.ctx.problems]
        seen: dict[str, RuleEntry] = {}
        for entry in self.ctx.rules:
            for name in dict.fromkeys((entry.id, *entry.rule.aliases)):
                prior = seen.get(name)
                if prior is not None:
                    what = "id" if name == entry.id else "alias"
                    out.append(self.issue(self.DUPLICATE, f"{what} {name!r} is already taken by the rule at "
                                          f"{prior.path}:{prior.loaded.line} ({prior.id})", entry,
                                          *(("id",) if name == entry.id else ("aliases",))))
                else:
                    seen[name] = entry
        for case in self.ctx.cases:
            if case.error is not None:
                out.append(self.issue(self.CASE, f"{case.case_id}: {case.error}", path=case.path, line=case.line,
                                      rule=case.rule if case.rule != "?" else None))
        return out


# ------------------------------------------------------------------ references
class ReferenceValidator(Validator):
    family = "reference"
    UNKNOWN_MODE = issue_type("R001", "unknown-failure-mode", "error",
                              "failure_modes/against names an id with no knowledge-base entry.")
    KB = issue_type("R002", "kb-unavailable", "error",
                    "The knowledge base does not load, so failure-mode ids cannot be checked.")
    UNKNOWN_FACT = issue_type("R003", "unknown-fact-type", "error",
                              "A pattern names a fact type the vocabulary does not declare.")
    UNKNOWN_FIELD = issue_type("R004", "unknown-field", "error",
                               "A condition tests a field the fact type does not have.")
    DESCRIPTIVE = issue_type("R005", "descriptive-field", "error",
                             "A condition tests a descriptive field (match=False) that the matcher never sees.")
    PLACEHOLDER = issue_type("R006", "unresolved-placeholder", "error",
                             "A template placeholder {alias.field} names an alias not bound in every "
                             "alternative, a field the bound fact lacks, or sits in text that is never rendered.")
    FORMAT = issue_type("R007", "placeholder-format-invalid", "warning",
                        "A placeholder's format spec does not apply to the field's kind; the value is "
                        "printed unformatted.")
    EMPTY_COMMAND = issue_type("R008", "empty-command", "error",
                               "A next step gives a command that is empty.")
    EMPTY_TEXT = issue_type("R009", "empty-text", "error",
                            "A title, explanation or next-step action is empty.")
    EMPTY_REF = issue_type("R010", "empty-reference", "error", "A reference is empty.")
    CASE_RULE = issue_type("R011", "test-unknown-rule", "error",
                           "A test case names a rule id (or alias) that no rule has; such a case fails.")
    CASE_MODE = issue_type("R012", "test-unknown-mode", "error",
                           "A test case's `top` names a failure mode with no knowledge-base entry.")
    UNGUARDED = issue_type("R014", "placeholder-may-render-unknown", "error",
                           "A placeholder {alias.field} names a field that a matching fact may lack (the rule "
                           "does not test it and it has no default), so the text could render '?'; test the "
                           "field (e.g. `exists: true`) or drop the placeholder.")
    UNGUARDED_DESC = issue_type("R015", "descriptive-placeholder-may-be-absent", "warning",
                                "A placeholder names a descriptive field (match=False) that a fact may lack, so "
                                "the text could render '?'.")
    issue_types = (UNKNOWN_MODE, KB, UNKNOWN_FACT, UNKNOWN_FIELD, DESCRIPTIVE, PLACEHOLDER, FORMAT,
                   EMPTY_COMMAND, EMPTY_TEXT, EMPTY_REF, CASE_RULE, CASE_MODE, UNGUARDED, UNGUARDED_DESC)

    _SAMPLE = {"number": 1.5, "integer": 3, "string": "x", "boolean": True}

    def validate(self, entry: RuleEntry) -> list[LintIssue]:
        rule = entry.rule
        out: list[LintIssue] = []
        kb = self.ctx.kb
        if kb is not None:
            for key in ("failure_modes", "against"):
                for i, mode in enumerate(getattr(rule, key)):
                    if mode not in kb:
                        out.append(self.issue(self.UNKNOWN_MODE, f"{key}: {mode!r} has no kb entry", entry, key, i))
        for sec, i, pat in pattern_lists(rule):
            spec = REGISTRY.get(pat.fact)
            if spec is None:
                out.append(self.issue(self.UNKNOWN_FACT, f"when.{sec}[{i}]: unknown fact type {pat.fact!r}",
                                      entry, "when", sec, i, "fact"))
                continue
            for fname in pat.where:
                fspec = spec.fields.get(fname)
                if fspec is None:
                    out.append(self.issue(self.UNKNOWN_FIELD, f"{pat.fact} has no field {fname!r}",
                                          entry, "when", sec, i, "where", fname))
                elif not fspec.match:
                    out.append(self.issue(self.DESCRIPTIVE, f"{pat.fact}.{fname} is descriptive (match=False)",
                                          entry, "when", sec, i, "where", fname))
        out += self._templates(entry)
        for t, loc in ((rule.title, ("title",)), (rule.explanation, ("explanation",))):
            if not t.en.strip():
                out.append(self.issue(self.EMPTY_TEXT, f"{loc[0]}.en is empty", entry, *loc))
        for i, step in enumerate(rule.next_steps):
            if not step.action.en.strip():
                out.append(self.issue(self.EMPTY_TEXT, f"next_steps[{i}].action.en is empty",
                                      entry, "next_steps", i, "action"))
            if step.command is not None and not step.command.strip():
                out.append(self.issue(self.EMPTY_COMMAND, f"next_steps[{i}].command is empty "
                                      "(drop the key, or give the command as a person would run it)",
                                      entry, "next_steps", i, "command"))
        for i, ref in enumerate(rule.references):
            if not ref.strip():
                out.append(self.issue(self.EMPTY_REF, f"references[{i}] is empty", entry, "references", i))
        return out

    def _templates(self, entry: RuleEntry) -> list[LintIssue]:
        rule = entry.rule
        bound = bound_aliases(rule)
        rendered: list[tuple[str, str, tuple]] = []
        for lang in ("en", "zh"):
            rendered.append((f"explanation.{lang}", getattr(rule.explanation, lang) or "", ("explanation", lang)))
        for i, step in enumerate(rule.next_steps):
            for lang in ("en", "zh"):
                rendered.append((f"next_steps[{i}].action.{lang}", getattr(step.action, lang) or "",
                                 ("next_steps", i, "action", lang)))
                if step.why is not None:
                    rendered.append((f"next_steps[{i}].why.{lang}", getattr(step.why, lang) or "",
                                     ("next_steps", i, "why", lang)))
            rendered.append((f"next_steps[{i}].command", step.command or "", ("next_steps", i, "command")))
        literal = [(f"title.{lang}", getattr(rule.title, lang) or "", ("title", lang)) for lang in ("en", "zh")]
        for i, fp in enumerate(rule.false_positives):
            literal += [(f"false_positives[{i}].{lang}", getattr(fp, lang) or "", ("false_positives", i, lang))
                        for lang in ("en", "zh")]
        out: list[LintIssue] = []
        for where, text, loc in literal:
            for m in PLACEHOLDER.finditer(text):
                out.append(self.issue(self.PLACEHOLDER, f"{where}: {m.group(0)} is never rendered here "
                                      "(only explanations and next steps are templates)", entry, *loc))
        for where, text, loc in rendered:
            for m in PLACEHOLDER.finditer(text):
                alias, fname, spec = m.group(1), m.group(2), m.group(3)
                types = bound.get(alias)
                if types is None:
                    have = ", ".join(sorted(bound)) or "none"
                    out.append(self.issue(self.PLACEHOLDER, f"{where}: {m.group(0)}: alias {alias!r} is not bound "
                                          f"in every alternative (bound: {have})", entry, *loc))
                    continue
                known = [REGISTRY[t].fields.get(fname) for t in types if t in REGISTRY]
                if len(known) != len(types) or any(f is None for f in known):
                    lacking = [t for t in types if t not in REGISTRY or fname not in REGISTRY[t].fields]
                    out.append(self.issue(self.PLACEHOLDER, f"{where}: {m.group(0)}: {', '.join(lacking)} has "
                                          f"no field {fname!r}", entry, *loc))
                    continue
                if not self._guaranteed(rule, alias, fname):
                    desc = all(not f.match for f in known)
                    out.append(self.issue(self.UNGUARDED_DESC if desc else self.UNGUARDED,
                                          f"{where}: {m.group(0)} may render '?': no condition of the rule "
                                          f"requires {alias}.{fname}", entry, *loc))
                if spec:
                    for fspec in known:
                        try:
                            format(self._SAMPLE[fspec.kind], spec)
                        except (ValueError, TypeError):
                            out.append(self.issue(self.FORMAT, f"{where}: {m.group(0)}: format {spec!r} does not "
                                                  f"apply to {fspec.kind} field {fname!r}", entry, *loc))
                            break
        return out

    @staticmethod
    def _guaranteed(rule: Rule, alias: str, fname: str) -> bool:
        """Every fact the alias can bind carries `fname`: each pattern binding the alias tests the
        field with a comparison (a missing field fails every comparison), or the field is always
        present on that fact type."""
        pats = [(sec, i, p) for sec, i, p in pattern_lists(rule) if sec != "none"
                and (p.alias or default_alias(rule, sec, i)) == alias]
        if not pats:
            return False
        joined = {v["ref"] for _s, _i, p in pattern_lists(rule) if _s != "none"
                  for ops in _conds(p.where).values() for v in ops.values()
                  if _is_ref(v) and isinstance(v.get("ref"), str)}
        for _sec, _i, p in pats:
            if always_present(p.fact, fname) or f"{alias}.{fname}" in joined:
                continue
            ops = _conds(p.where).get(fname)
            if not ops:
                return False
            if ops.get("exists") is False or (set(ops) <= {"nonfinite"} and ops.get("nonfinite") is False):
                return False
        return True

    def finalize(self) -> list[LintIssue]:
        out = []
        err = self.ctx.kb_error
        if err is not None:
            out.append(self.issue(self.KB, f"knowledge base does not load: {err.message}"
                                  + (f" ({err.hint})" if err.hint else ""), path=err.path, line=err.line))
        names = self.ctx.by_name()
        for case in self.ctx.cases:
            if case.error is not None:
                continue
            if case.rule not in names:
                out.append(self.issue(self.CASE_RULE, f"{case.case_id}: no rule (or alias) {case.rule!r}",
                                      path=case.path, line=case.line, rule=case.rule))
            if case.top is not None and self.ctx.kb is not None and case.top not in self.ctx.kb:
                out.append(self.issue(self.CASE_MODE, f"{case.case_id}: top {case.top!r} has no kb entry",
                                      path=case.path, line=case.line, rule=case.rule))
        return out


# ------------------------------------------------------------------ quality
class QualityValidator(Validator):
    family = "quality"
    NO_STEPS = issue_type("Q001", "missing-next-steps", "error",
                          "A rule that supports a failure mode gives no next step a person can take.")
    NO_SOURCE = issue_type("Q002", "missing-reference", "error",
                           "A rule that supports a failure mode cites no reference (guide section, document, case).")
    NO_ZH = issue_type("Q003", "missing-translation", "error",
                       "A title, explanation or next-step action has no Chinese (zh) text.")
    SAME_ZH = issue_type("Q004", "untranslated", "warning",
                         "The zh text is a copy of the en text.")
    NO_POSITIVE = issue_type("Q005", "missing-positive-test", "error",
                             "The rule has no positive test case (facts on which it must fire).")
    NO_NEGATIVE = issue_type("Q006", "missing-negative-test", "error",
                             "The rule has no negative test case (similar facts on which it must stay silent).")
    NO_INSUFFICIENT = issue_type("Q007", "missing-insufficient-test", "info",
                                 "The rule has no insufficient-evidence test case.")
    NO_FP = issue_type("Q008", "missing-false-positives", "info",
                       "A rule that supports a failure mode documents no known false positives.")
    issue_types = (NO_STEPS, NO_SOURCE, NO_ZH, SAME_ZH, NO_POSITIVE, NO_NEGATIVE, NO_INSUFFICIENT, NO_FP)

    def __init__(self, ctx: LintContext) -> None:
        super().__init__(ctx)
        self.counts = case_counts(ctx.cases, [e.rule for e in ctx.rules])

    def validate(self, entry: RuleEntry) -> list[LintIssue]:
        rule = entry.rule
        out: list[LintIssue] = []
        supports = bool(rule.failure_modes)
        if supports and not rule.next_steps:
            out.append(self.issue(self.NO_STEPS, f"supports {', '.join(rule.failure_modes)} but has no next_steps",
                                  entry, "failure_modes"))
        if supports and not [r for r in rule.references if r.strip()]:
            out.append(self.issue(self.NO_SOURCE, "no references: cite the guide section or case it encodes",
                                  entry, "failure_modes"))
        if supports and not rule.false_positives:
            out.append(self.issue(self.NO_FP, "no false_positives documented", entry, "failure_modes"))
        texts = [("title", rule.title, ("title",)), ("explanation", rule.explanation, ("explanation",))]
        texts += [(f"next_steps[{i}].action", s.action, ("next_steps", i, "action"))
                  for i, s in enumerate(rule.next_steps)]
        for where, text, loc in texts:
            if not (text.zh or "").strip():
                out.append(self.issue(self.NO_ZH, f"{where} has no zh text", entry, *loc))
            elif text.zh.strip() == text.en.strip() and re.search(r"[A-Za-z]{3}", text.en):
                out.append(self.issue(self.SAME_ZH, f"{where}.zh repeats the English text", entry, *loc, "zh"))
        if rule.status != "deprecated":
            have = self.counts.get(rule.id, Counter())
            if not have["positive"]:
                out.append(self.issue(self.NO_POSITIVE, "no positive test case (kind: positive) in any *.test.yaml",
                                      entry, "id"))
            if not have["negative"]:
                out.append(self.issue(self.NO_NEGATIVE, "no negative test case (kind: negative) in any *.test.yaml",
                                      entry, "id"))
            if not have["insufficient"]:
                out.append(self.issue(self.NO_INSUFFICIENT, "no insufficient-evidence test case", entry, "id"))
        return out


# ------------------------------------------------------------------ logic
def _unsat_reason(spec: FieldSpec, ops: dict[str, Any]) -> str | None:
    """Why no value of this field can meet every literal test in `ops` (None if some can)."""
    lits = {op: v for op, v in ops.items() if not _is_ref(v) and op in OPERATORS}
    joins = [op for op, v in ops.items() if _is_ref(v)]
    exists, nonfinite = lits.get("exists"), lits.get("nonfinite")
    compared = [op for op in lits if op not in ("exists", "nonfinite")] + joins
    if exists is False and (compared or nonfinite is False):
        return "'exists: false' with a comparison (a missing field fails every comparison)"
    if nonfinite is True and (compared or exists is True):
        return "'nonfinite: true' with a comparison or 'exists: true' (a NaN/Inf value fails both)"
    try:
        candidates: set | None = None
        if "eq" in lits:
            candidates = {lits["eq"]}
        if "in" in lits and isinstance(lits["in"], list):
            vals = set(lits["in"])
            candidates = vals if candidates is None else candidates & vals
        if spec.kind == "boolean" and candidates is None and ("ne" in lits or "not_in" in lits):
            candidates = {True, False}
        if spec.choices and candidates is None and ("ne" in lits or "not_in" in lits):
            candidates = set(spec.choices)
        excluded = set()
        if "ne" in lits:
            excluded.add(lits["ne"])
        if isinstance(lits.get("not_in"), list):
            excluded |= set(lits["not_in"])
        lo = hi = None
        lo_open = hi_open = False
        for op in ("gt", "ge"):
            if op in lits and _number(lits[op]):
                v = float(lits[op])
                if lo is None or v > lo or (v == lo and op == "gt"):
                    lo, lo_open = v, op == "gt"
        for op in ("lt", "le"):
            if op in lits and _number(lits[op]):
                v = float(lits[op])
                if hi is None or v < hi or (v == hi and op == "lt"):
                    hi, hi_open = v, op == "lt"
        regex = None
        if isinstance(lits.get("matches"), str):
            regex = re.compile(lits["matches"])

        def ok(v: Any) -> bool:
            if v in excluded:
                return False
            if _number(v):
                if lo is not None and (v < lo or (lo_open and v == lo)):
                    return False
                if hi is not None and (v > hi or (hi_open and v == hi)):
                    return False
            elif lo is not None or hi is not None:
                return False
            if regex is not None and not (isinstance(v, str) and regex.fullmatch(v)):
                return False
            return True

        if candidates is not None:
            if not any(ok(v) for v in candidates):
                return f"no value meets {_fmt_ops(lits)}"
            return None
        if lo is not None and hi is not None:
            if lo > hi or (lo == hi and (lo_open or hi_open)) or (lo == hi and lo in excluded):
                return f"{_fmt_ops(lits)} cannot all hold"
            if spec.kind == "integer":
                first = math.floor(lo) + 1 if lo_open or lo != math.floor(lo) else lo
                last = math.ceil(hi) - 1 if hi_open or hi != math.ceil(hi) else hi
                if first > last:
                    return f"no integer meets {_fmt_ops(lits)}"
    except (TypeError, re.error):
        return None  # ill-typed values are the compiler's finding
    return None


def _outside_choices(spec: FieldSpec, ops: dict[str, Any]) -> list[Any]:
    if not spec.choices:
        return []
    bad = []
    for op in ("eq", "ne", "in", "not_in"):
        v = ops.get(op)
        if v is None or _is_ref(v):
            continue
        for item in (v if isinstance(v, list) else [v]):
            if isinstance(item, str) and item not in spec.choices and item not in bad:
                bad.append(item)
    return bad


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


def _implied(p_ops: dict[str, Any], n_op: str, n_val: Any, own_alias: str, field_name: str,
             present: bool = False) -> bool:
    """Does every fact meeting p_ops (on this field) also meet the test `n_op n_val`?
    `present`: the field always has a value (required or defaulted)."""
    lits = {op: v for op, v in p_ops.items() if not _is_ref(v)}
    present = present or bool(set(lits) - {"exists", "nonfinite"}) or lits.get("exists") is True \
        or lits.get("nonfinite") is False
    if _is_ref(n_val):
        ref = n_val.get("ref", "")
        same = ref == f"{own_alias}.{field_name}" and n_val.get("scale") in (None, 1, 1.0)
        return same and n_op in ("eq", "le", "ge") and present
    if n_op in lits and lits[n_op] == n_val:
        return True
    if n_op == "exists":
        return (n_val is True and present) or (n_val is False and lits.get("exists") is False)
    point = lits.get("eq")
    if point is None and isinstance(lits.get("in"), list) and len(lits["in"]) == 1:
        point = lits["in"][0]
    try:
        if point is not None:
            return {"eq": lambda: point == n_val, "ne": lambda: point != n_val,
                    "in": lambda: point in n_val, "not_in": lambda: point not in n_val,
                    "gt": lambda: point > n_val, "ge": lambda: point >= n_val,
                    "lt": lambda: point < n_val, "le": lambda: point <= n_val}.get(n_op, lambda: False)()
        if n_op in ("gt", "ge"):
            for op in ("gt", "ge"):
                if op in lits and (lits[op] > n_val or (lits[op] == n_val and (n_op == "ge" or op == "gt"))):
                    return True
        if n_op in ("lt", "le"):
            for op in ("lt", "le"):
                if op in lits and (lits[op] < n_val or (lits[op] == n_val and (n_op == "le" or op == "lt"))):
                    return True
        if n_op == "in" and isinstance(lits.get("in"), list) and isinstance(n_val, list):
            return set(lits["in"]) <= set(n_val)
    except TypeError:
        return False
    return False


def canonical_when(rule: Rule) -> str:
    """The rule's conditions with aliases renamed by position and `any`/`none` order ignored,
    so two rules that test the same thing compare equal."""
    names: dict[str, str] = {}
    for sec, i, pat in pattern_lists(rule):
        names.setdefault(pat.alias or default_alias(rule, sec, i), f"${len(names)}")

    def norm(value: Any) -> Any:
        if isinstance(value, dict):
            out = {k: norm(v) for k, v in value.items()}
            if isinstance(out.get("ref"), str) and "." in out["ref"]:
                alias, f = out["ref"].split(".", 1)
                out["ref"] = f"{names.get(alias, alias)}.{f}"
            return out
        if isinstance(value, list):
            return [norm(v) for v in value]
        return value

    def pat_key(sec: str, i: int, pat: Any) -> Any:
        return [pat.fact, names[pat.alias or default_alias(rule, sec, i)],
                {f: norm(ops) for f, ops in _conds(pat.where).items()}]

    doc = {
        "all": [pat_key("all", i, p) for i, p in enumerate(rule.when.all)],
        "any": sorted(json.dumps(pat_key("any", i, p), sort_keys=True, default=str)
                      for i, p in enumerate(rule.when.any)),
        "none": sorted(json.dumps(pat_key("none", i, p)[::2], sort_keys=True, default=str)
                       for i, p in enumerate(rule.when.none)),
    }
    return json.dumps(doc, sort_keys=True, default=str)


class LogicValidator(Validator):
    family = "logic"
    UNSAT = issue_type("L001", "unsatisfiable-condition", "error",
                       "No fact can meet a pattern every firing needs, so the rule can never fire.")
    DEAD_ALT = issue_type("L002", "dead-alternative", "warning",
                          "One `any` pattern can never match; the rule fires only through the others.")
    CHOICES = issue_type("L003", "value-outside-choices", "error",
                         "A condition compares a field with a value outside the field's declared choices.")
    DEAD_NONE = issue_type("L004", "never-matching-exclusion", "warning",
                           "A `none` pattern can never match, so it never blocks the rule.")
    SELF_BLOCK = issue_type("L005", "self-excluding", "error",
                            "A `none` pattern matches a fact the rule itself binds, so the rule can never fire.")
    SHADOWED = issue_type("L006", "shadowed-rule", "warning",
                          "Two rules have identical conditions: they always fire together.")
    DUPLICATE = issue_type("L007", "duplicate-rule", "error",
                           "Two rules have identical conditions and the same effect (double counting).")
    NOT_COLLECTED = issue_type("L008", "fact-not-collected", "warning",
                               "The rule needs a fact type no collector emits (or only a person can report), "
                               "so it fires only on facts given by hand.")
    DEPRECATED_REF = issue_type("L009", "deprecated-rule-referenced", "warning",
                                "A deprecated rule is still mentioned by a live rule or a kb entry.")
    CONTRADICTS = issue_type("L010", "supports-and-against", "error",
                             "A rule both supports and argues against the same failure mode.")
    OLD_ID = issue_type("L011", "old-id-referenced", "warning",
                        "A rule's old id (alias) is used where its current id belongs.")
    DEPRECATED_ONLY = issue_type("L012", "deprecated-only-support", "warning",
                                 "A failure mode is supported only by deprecated rules.")
    issue_types = (UNSAT, DEAD_ALT, CHOICES, DEAD_NONE, SELF_BLOCK, SHADOWED, DUPLICATE, NOT_COLLECTED,
                   DEPRECATED_REF, CONTRADICTS, OLD_ID, DEPRECATED_ONLY)

    def _points(self, rule: Rule) -> dict[tuple[str, str], Any]:
        """(alias, field) -> the one literal value a positive pattern pins the field to."""
        out = {}
        for sec in ("all", "any"):
            for i, pat in enumerate(getattr(rule.when, sec)):
                alias = pat.alias or default_alias(rule, sec, i)
                for f, ops in _conds(pat.where).items():
                    if "eq" in ops and not _is_ref(ops["eq"]):
                        out[(alias, f)] = ops["eq"]
                    elif isinstance(ops.get("in"), list) and len(ops["in"]) == 1:
                        out[(alias, f)] = ops["in"][0]
        return out

    def _pattern_problem(self, entry: RuleEntry, sec: str, i: int, pat: Any,
                         points: dict, out: list[LintIssue]) -> str | None:
        spec = REGISTRY.get(pat.fact)
        if spec is None:
            return None
        reasons = []
        for fname, ops in _conds(pat.where).items():
            fspec = spec.fields.get(fname)
            if fspec is None or not fspec.match:
                continue
            bad = _outside_choices(fspec, ops)
            if bad:
                out.append(self.issue(self.CHOICES, f"{pat.fact}.{fname}: {', '.join(map(repr, bad))} not among "
                                      f"{list(fspec.choices)}", entry, "when", sec, i, "where", fname))
                continue
            eff = dict(ops)
            # a join `eq` to a field another pattern pins to one value is that value
            ref = ops.get("eq")
            if _is_ref(ref) and isinstance(ref.get("ref"), str) and "." in ref["ref"]:
                pinned = points.get(tuple(ref["ref"].split(".", 1)), None)
                if pinned is not None:
                    scale = ref.get("scale")
                    value = pinned * scale if scale is not None and _number(pinned) else pinned
                    eff["eq"] = value
            reason = _unsat_reason(fspec, eff)
            if reason:
                reasons.append(f"{pat.fact}.{fname}: {reason}")
        return "; ".join(reasons) or None

    def validate(self, entry: RuleEntry) -> list[LintIssue]:
        rule = entry.rule
        out: list[LintIssue] = []
        points = self._points(rule)
        for i, pat in enumerate(rule.when.all):
            why = self._pattern_problem(entry, "all", i, pat, points, out)
            if why:
                out.append(self.issue(self.UNSAT, f"when.all[{i}] can never match ({why})",
                                      entry, "when", "all", i))
        dead = []
        for j, pat in enumerate(rule.when.any):
            why = self._pattern_problem(entry, "any", j, pat, points, out)
            if why:
                dead.append((j, why))
        if rule.when.any and len(dead) == len(rule.when.any):
            out.append(self.issue(self.UNSAT, "no `any` pattern can match (" + "; ".join(w for _, w in dead) + ")",
                                  entry, "when", "any"))
        else:
            for j, why in dead:
                out.append(self.issue(self.DEAD_ALT, f"when.any[{j}] can never match ({why})",
                                      entry, "when", "any", j))
        for k, pat in enumerate(rule.when.none):
            why = self._pattern_problem(entry, "none", k, pat, points, out)
            if why:
                out.append(self.issue(self.DEAD_NONE, f"when.none[{k}] can never match ({why})",
                                      entry, "when", "none", k))
                continue
            blocker = self._self_block(rule, pat)
            if blocker:
                out.append(self.issue(self.SELF_BLOCK, f"when.none[{k}] matches the fact bound as {blocker!r} "
                                      "itself, so the rule can never fire (exclude it with a distinguishing "
                                      "condition)", entry, "when", "none", k))
        both = sorted(set(rule.failure_modes) & set(rule.against))
        if both:
            out.append(self.issue(self.CONTRADICTS, f"{', '.join(both)} in both failure_modes and against",
                                  entry, "against"))
        out += self._collectable(entry)
        return out

    def _self_block(self, rule: Rule, neg: Any) -> str | None:
        """Alias of a pattern present in every firing whose fact always meets `neg` too."""
        n_conds = _conds(neg.where)
        candidates = [(p.alias or default_alias(rule, "all", i), p) for i, p in enumerate(rule.when.all)]
        if len(rule.when.any) == 1:
            candidates.append((rule.when.any[0].alias or default_alias(rule, "any", 0), rule.when.any[0]))
        for alias, pos in candidates:
            if pos.fact != neg.fact:
                continue
            p_conds = _conds(pos.where)
            if all(all(_implied(p_conds.get(f, {}), op, v, alias, f, always_present(pos.fact, f))
                       for op, v in ops.items())
                   for f, ops in n_conds.items()):
                return alias
        return None

    def _collectable(self, entry: RuleEntry) -> list[LintIssue]:
        needs_all, needs_any = rule_fact_needs(entry.rule)
        known_all = [t for t in needs_all if t in REGISTRY]
        missing = [t for t in known_all if not is_collectable(t)]
        known_any = [t for t in needs_any if t in REGISTRY]
        if known_any and not any(is_collectable(t) for t in known_any):
            missing += [t for t in known_any if t not in missing]
        if not missing:
            return []
        who = "; ".join(f"{t} ({', '.join(REGISTRY[t].collectors) or 'no collector'})" for t in missing)
        return [self.issue(self.NOT_COLLECTED, f"needs facts only given by hand: {who}", entry, "when")]

    def finalize(self) -> list[LintIssue]:
        out: list[LintIssue] = []
        groups: dict[str, list[RuleEntry]] = defaultdict(list)
        for entry in self.ctx.rules:
            groups[canonical_when(entry.rule)].append(entry)
        for same in groups.values():
            first = same[0]
            for other in same[1:]:
                effect = lambda r: (sorted(r.failure_modes), sorted(r.against), r.symptom)  # noqa: E731
                itype = self.DUPLICATE if effect(first.rule) == effect(other.rule) else self.SHADOWED
                out.append(self.issue(itype, f"same conditions as {first.id} ({first.path}:{first.loaded.line})",
                                      other, "when"))
        deprecated = {e.id: e for e in self.ctx.rules if e.rule.status == "deprecated"}
        aliases = {a: e for e in self.ctx.rules for a in e.rule.aliases}
        for case in self.ctx.cases:
            if case.error is None and case.rule in aliases:
                out.append(self.issue(self.OLD_ID, f"{case.case_id}: {case.rule!r} is an old id of "
                                      f"{aliases[case.rule].id}", path=case.path, line=case.line,
                                      rule=aliases[case.rule].id))
        watched = {**{d: d for d in deprecated}, **{a: e.id for a, e in aliases.items()}}
        if watched:
            pattern = re.compile(r"\b(" + "|".join(map(re.escape, sorted(watched, key=len, reverse=True))) + r")\b")
            for entry in self.ctx.rules:
                text = entry.rule.model_dump_json(exclude={"id", "aliases"})
                for found in sorted(set(pattern.findall(text))):
                    target = watched[found]
                    if target == entry.id:
                        continue
                    if found in deprecated and entry.rule.status != "deprecated":
                        out.append(self.issue(self.DEPRECATED_REF, f"mentions deprecated rule {found}", entry))
                    elif found in aliases:
                        out.append(self.issue(self.OLD_ID, f"mentions {found}, an old id of {target}", entry))
            for kb_id, kb_entry in (self.ctx.kb or {}).items():
                text = kb_entry.model_dump_json()
                for found in sorted(set(pattern.findall(text)) & set(deprecated)):
                    out.append(self.issue(self.DEPRECATED_REF, f"kb entry {kb_id} mentions deprecated rule {found}",
                                          deprecated[found], "status"))
        support: dict[str, list[RuleEntry]] = defaultdict(list)
        for entry in self.ctx.rules:
            for mode in entry.rule.failure_modes:
                support[mode].append(entry)
        for mode, entries in sorted(support.items()):
            if all(e.rule.status == "deprecated" for e in entries):
                out.append(self.issue(self.DEPRECATED_ONLY, f"{mode} is supported only by deprecated rule(s) "
                                      f"{', '.join(e.id for e in entries)}", entries[0], "status"))
        return out


# ------------------------------------------------------------------ commands
class CommandValidator(Validator):
    """Every command and every --flag / environment variable in rules and kb entries is checked
    against the tools' own option lists (engine/rulepack/commands.py and its data files)."""

    family = "command"
    TOOL = issue_type("C001", "unknown-command-option", "error",
                      "A command uses an msprobe sub-command/option, or a tool option or argument, that the "
                      "tool does not accept (msprobe CLI snapshot, tools.yaml).")
    FLAG = issue_type("C002", "unknown-framework-flag", "error",
                      "A --flag is declared by no Megatron, MindSpeed, MindSpeed-LLM, DeepSpeed or HF Trainer "
                      "release (framework_flags.json).")
    DEPRECATED = issue_type("C003", "deprecated-framework-flag", "warning",
                            "A --flag is deprecated or gone in current releases and the text does not say so.")
    ENV = issue_type("C004", "unknown-environment-variable", "error",
                     "An environment variable is not in env_vars.yaml, or a step sets one that is not documented.")
    ENV_VALUE = issue_type("C005", "invalid-environment-value", "error",
                           "A command sets an environment variable to a value its documentation does not accept.")
    IN_PLACE = issue_type("C006", "in-place-edit", "error",
                          "A command edits a file in place (sed -i): reruns must write a copy into a new run "
                          "folder so the evidence precdx reads stays intact.")
    CONFIG = issue_type("C007", "invalid-msprobe-config", "error",
                        "An msprobe config written by a command has an unknown key, task, level or mode.")
    issue_types = (TOOL, FLAG, DEPRECATED, ENV, ENV_VALUE, IN_PLACE, CONFIG)

    def _types(self):
        return {"msprobe": self.TOOL, "tool": self.TOOL, "flag": self.FLAG, "deprecated": self.DEPRECATED,
                "env": self.ENV, "env_value": self.ENV_VALUE, "in_place": self.IN_PLACE, "config": self.CONFIG}

    def validate(self, entry: RuleEntry) -> list[LintIssue]:
        from engine.rulepack.commands import check_command, check_text

        rule = entry.rule
        kinds = self._types()
        out: list[LintIssue] = []
        texts: list[tuple[str, tuple]] = []
        for lang in ("en", "zh"):
            texts.append((getattr(rule.title, lang) or "", ("title",)))
            texts.append((getattr(rule.explanation, lang) or "", ("explanation",)))
        for i, fp in enumerate(rule.false_positives):
            texts.append((fp.en, ("false_positives", i)))
        for i, st in enumerate(rule.next_steps):
            texts.append((st.action.en, ("next_steps", i, "action")))
            if st.why is not None:
                texts.append((st.why.en, ("next_steps", i, "why")))
            if st.command:
                for f in check_command(st.command, st.action.en):
                    out.append(self.issue(kinds[f.kind], f"next_steps[{i}].command: {f.message}",
                                          entry, "next_steps", i, "command"))
        for text, loc in texts:
            for f in check_text(text):
                out.append(self.issue(kinds[f.kind], f"{'.'.join(map(str, loc))}: {f.message}", entry, *loc))
        return out

    def finalize(self) -> list[LintIssue]:
        from engine.kb import kb_dir
        from engine.rulepack.commands import check_command, check_text

        kinds = self._types()
        out: list[LintIssue] = []
        root = self.ctx.kb_root or kb_dir()
        for mode, kb in sorted((self.ctx.kb or {}).items()):
            path = root / kb.area / f"{mode}.yaml"
            lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []

            def line_of_text(needle: str) -> int | None:
                probe = needle.strip().splitlines()[0][:40] if needle.strip() else ""
                return next((n + 1 for n, ln in enumerate(lines) if probe and probe in ln), None)

            texts = [kb.meaning.en, kb.impact.en, kb.diagnosis.en, kb.mitigation.en, kb.title.en]
            texts += [s.en for s in kb.symptoms] + [c.why.en for c in kb.commands]
            for text in texts:
                for f in check_text(text):
                    out.append(self.issue(kinds[f.kind], f"kb {mode}: {f.message}", path=str(path),
                                          line=line_of_text(text)))
            for c in kb.commands:
                for f in check_command(c.command, c.why.en):
                    out.append(self.issue(kinds[f.kind], f"kb {mode} command: {f.message}", path=str(path),
                                          line=line_of_text(c.command.replace('"', '\\"')) or line_of_text(c.command)))
        return out


# ------------------------------------------------------------------ compiler
class CompilerValidator(Validator):
    """Surfaces what the compiler (the runtime's own gate) rejects that no finer check named."""

    family = "reference"
    COMPILE = issue_type("R013", "compile-error", "error",
                         "The compiler rejects the rule (operator, value type, regex, join, engine limit); "
                         "the runtime would refuse the whole pack.")
    issue_types = (COMPILE,)

    def finalize(self) -> list[LintIssue]:
        # R014 (a placeholder that may print '?') never explains a compile failure
        flagged = {i.rule for i in self.ctx.issues if i.severity == "error" and i.code != "R014"}
        out = []
        for entry in self.ctx.rules:
            result = self.ctx.compiled.get(entry.id)
            if isinstance(result, PrecdxError) and entry.id not in flagged:
                msg = result.message.removeprefix(f"rule {entry.id}: ")
                out.append(self.issue(self.COMPILE, msg, entry, line=result.line))
        return out


# ------------------------------------------------------------------ driver
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
        if isinstance(doc, dict) and "rules" in doc and "id" not in doc:
            extra = sorted(set(doc) - {"rules"})
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
            try:
                rule = parse_rule(item, spath)
            except PrecdxError as exc:
                kind = "version" if "schema_version" in exc.message else "rule"
                rid = item.get("id") if isinstance(item, dict) and isinstance(item.get("id"), str) else None
                ctx.problems.append(LoadProblem(exc.path or spath, exc.line, exc.message
                                                + (f" ({exc.hint})" if exc.hint else ""), kind, rid))
                continue
            try:
                loaded = LoadedRule(rule, spath, line_of(item), item)  # type: ignore[call-arg]
            except TypeError:  # a loader without the line-aware document
                loaded = LoadedRule(rule, spath, line_of(item))
            ctx.rules.append(RuleEntry(loaded, item))


def build_context(rules_path: str | Path | None = None, *, kb_path: str | Path | None = None) -> LintContext:
    from engine.kb import load_kb

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
