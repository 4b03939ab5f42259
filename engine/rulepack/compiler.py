"""Compile validated rules into the matcher IR, checking every condition against the fact
vocabulary (field exists, operator fits the field's kind, value has the field's type) and the
limits of the durable-rules back end. Both matchers (durable, python) run this same IR."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from precdx.errors import PrecdxError
from precdx.facts import REGISTRY, FieldSpec
from precdx.rulepack.loader import LoadedRule
from precdx.rulepack.schema import JOIN_OPERATORS, OPERATORS, Rule

MAX_PATTERNS = 16          # durable: > 16 patterns per rule fails at assert time (error 304)
MAX_JOINS_PER_PATTERN = 28  # durable: about 30 join conditions per pattern
MAX_PRIORITY = 65534
PLACEHOLDER = re.compile(r"\{([A-Za-z_]\w*)\.([A-Za-z_]\w*)(?::([^{}]*))?\}")


@dataclass(frozen=True)
class Test:
    """One condition on one field. `value` is a literal unless `ref` (alias, field) is set."""

    field: str
    op: str
    value: Any = None
    ref: tuple[str, str] | None = None
    scale: float | None = None
    regex_id: int | None = None  # matches: index into CompiledPack.regexes

    def describe(self) -> str:
        sym = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}.get(self.op, self.op)
        if self.ref:
            rhs = f"{self.ref[0]}.{self.ref[1]}" + (f" * {self.scale:g}" if self.scale is not None else "")
        else:
            rhs = repr(self.value) if not isinstance(self.value, tuple) else list(self.value)
        return f"{self.field} {sym} {rhs}"


@dataclass(frozen=True)
class PatternIR:
    alias: str
    fact_type: str
    tests: tuple[Test, ...]

    def refs(self) -> set[str]:
        return {t.ref[0] for t in self.tests if t.ref}


@dataclass(frozen=True)
class Alternative:
    positives: tuple[PatternIR, ...]
    negatives: tuple[PatternIR, ...]


@dataclass
class CompiledRule:
    rule: Rule
    path: str
    line: int | None
    alternatives: tuple[Alternative, ...]
    priority: int = 0

    @property
    def id(self) -> str:
        return self.rule.id

    @property
    def condition_count(self) -> int:
        """How many conditions one alternative checks (used for specificity)."""
        alt = self.alternatives[0]
        return sum(max(1, len(p.tests)) for p in alt.positives) + len(alt.negatives)


@dataclass
class CompiledPack:
    rules: list[CompiledRule]
    regexes: list[tuple[str, str, re.Pattern]] = field(default_factory=list)  # (fact_type, field, re)
    version: str = ""

    def by_id(self) -> dict[str, CompiledRule]:
        out = {}
        for r in self.rules:
            out[r.id] = r
            for a in r.rule.aliases:
                out[a] = r
        return out


def _fail(lr: LoadedRule, msg: str, *loc: Any) -> PrecdxError:
    return PrecdxError(f"rule {lr.rule.id}: {msg}", path=lr.path, line=lr.line_at(*loc) if loc else lr.line)


def _check_literal(lr: LoadedRule, spec: FieldSpec, where: str, op: str, value: Any) -> Any:
    if op in ("exists", "nonfinite"):
        if not isinstance(value, bool):
            raise _fail(lr, f"{where}: '{op}' takes true or false")
        if op == "nonfinite" and spec.kind not in ("number", "integer"):
            raise _fail(lr, f"{where}: 'nonfinite' applies to numbers only")
        return value
    if op == "matches":
        if spec.kind != "string" or not isinstance(value, str):
            raise _fail(lr, f"{where}: 'matches' takes a regex string on a string field")
        try:
            re.compile(value)
        except re.error as exc:
            raise _fail(lr, f"{where}: bad regex: {exc}") from None
        return value
    if op in ("in", "not_in"):
        if not isinstance(value, list) or not value:
            raise _fail(lr, f"{where}: '{op}' takes a non-empty list")
        return tuple(_check_scalar(lr, spec, where, v) for v in value)
    if op in ("lt", "le", "gt", "ge") and spec.kind not in ("number", "integer"):
        raise _fail(lr, f"{where}: '{op}' needs a numeric field ({spec.name} is {spec.kind})")
    return _check_scalar(lr, spec, where, value)


def _check_scalar(lr: LoadedRule, spec: FieldSpec, where: str, value: Any) -> Any:
    kind = spec.kind
    ok = (
        (kind == "string" and isinstance(value, str))
        or (kind == "boolean" and isinstance(value, bool))
        or (kind in ("number", "integer") and isinstance(value, (int, float)) and not isinstance(value, bool))
    )
    if not ok:
        raise _fail(lr, f"{where}: value {value!r} does not fit field {spec.name!r} ({kind})")
    if spec.choices and value not in spec.choices:
        raise _fail(lr, f"{where}: {value!r} is not one of {list(spec.choices)}")
    if kind in ("number", "integer"):
        return float(value) if kind == "number" else value
    return value


def _compile_pattern(lr: LoadedRule, pat, index: int, bound: dict[str, str], regexes: list,
                     negative: bool, loc: tuple = ()) -> PatternIR:
    spec = REGISTRY.get(pat.fact)
    where0 = f"pattern {pat.fact!r}"
    if spec is None:
        raise _fail(lr, f"{where0}: unknown fact type", *loc, "fact")
    return _compile_tests(lr, pat, index, bound, regexes, negative, spec, where0, loc)


def _compile_tests(lr, pat, index, bound, regexes, negative, spec, where0, loc) -> PatternIR:
    import functools
    _fail_here = functools.partial(_fail_at, lr, loc)
    alias = pat.alias or f"_{'n' if negative else 'p'}{index}"
    tests: list[Test] = []
    joins = 0
    for fname, cond in pat.where.items():
        where = f"{pat.fact}.{fname}"
        fspec = spec.fields.get(fname)
        if fspec is None:
            raise _fail_here(f"{where}: fact type {pat.fact!r} has no field {fname!r}", fname)
        if not fspec.match:
            raise _fail_here(f"{where}: field is descriptive (match=False); rules must not test it", fname)
        if not isinstance(cond, dict):
            cond = {"eq": cond}
        if not cond:
            raise _fail_here(f"{where}: empty condition", fname)
        for op, value in cond.items():
            if op not in OPERATORS:
                raise _fail_here(f"{where}: unknown operator {op!r} (use one of {', '.join(OPERATORS)})", fname)
            if isinstance(value, dict):
                if op not in JOIN_OPERATORS:
                    raise _fail_here(f"{where}: '{op}' cannot take a reference", fname)
                ref = value.get("ref")
                extra = set(value) - {"ref", "scale"}
                if not isinstance(ref, str) or "." not in ref or extra:
                    raise _fail_here(f"{where}: a reference is {{ref: ALIAS.FIELD, scale: NUMBER}}", fname)
                ralias, rfield = ref.split(".", 1)
                if ralias not in bound and ralias != alias:
                    raise _fail_here(f"{where}: reference to unbound alias {ralias!r}", fname)
                rtype = bound.get(ralias, pat.fact)
                rspec = REGISTRY[rtype].fields.get(rfield)
                if rspec is None or not rspec.match:
                    raise _fail_here(f"{where}: {rtype!r} has no matchable field {rfield!r}", fname)
                numeric = {"number", "integer"}
                if (fspec.kind in numeric) != (rspec.kind in numeric) or (
                        fspec.kind not in numeric and fspec.kind != rspec.kind):
                    raise _fail_here(f"{where}: cannot compare {fspec.kind} with {rspec.kind}", fname)
                if op in ("lt", "le", "gt", "ge") and fspec.kind not in numeric:
                    raise _fail_here(f"{where}: '{op}' needs numeric fields", fname)
                scale = value.get("scale")
                if scale is not None and (isinstance(scale, bool) or not isinstance(scale, (int, float))
                                          or fspec.kind not in numeric):
                    raise _fail_here(f"{where}: scale must be a number on numeric fields", fname)
                tests.append(Test(fname, op, ref=(ralias, rfield), scale=None if scale is None else float(scale)))
                joins += 1
                continue
            try:
                val = _check_literal(lr, fspec, where, op, value)
            except PrecdxError as exc:
                exc.line = lr.line_at(*loc, "where", fname)
                raise PrecdxError(exc.message, path=exc.path, line=exc.line) from None
            regex_id = None
            if op == "matches":
                regex_id = len(regexes)
                regexes.append((pat.fact, fname, re.compile(val)))
            tests.append(Test(fname, op, value=val, regex_id=regex_id))
    if joins > MAX_JOINS_PER_PATTERN:
        raise _fail_here(f"{where0}: {joins} joins; the engine allows {MAX_JOINS_PER_PATTERN}")
    return PatternIR(alias, pat.fact, tuple(tests))


def _fail_at(lr: LoadedRule, loc: tuple, msg: str, field: str | None = None) -> PrecdxError:
    return _fail(lr, msg, *loc, "where", *( (field,) if field else ()))


def compile_rule(lr: LoadedRule, regexes: list, known_modes: set[str] | None = None) -> CompiledRule:
    rule = lr.rule
    if known_modes is not None:
        for key in ("failure_modes", "against"):
            for mode in getattr(rule, key):
                if mode not in known_modes:
                    raise _fail(lr, f"unknown failure mode {mode!r}", key)
    bound: dict[str, str] = {}
    positives: list[PatternIR] = []
    for i, pat in enumerate(rule.when.all):
        ir = _compile_pattern(lr, pat, i, bound, regexes, negative=False, loc=("when", "all", i))
        if ir.alias in bound:
            raise _fail(lr, f"alias {ir.alias!r} bound twice")
        bound[ir.alias] = ir.fact_type
        positives.append(ir)
    alternatives_pos: list[list[PatternIR]] = []
    if rule.when.any:
        for j, pat in enumerate(rule.when.any):
            local = dict(bound)
            ir = _compile_pattern(lr, pat, len(positives) + j, local, regexes, negative=False,
                                  loc=("when", "any", j))
            if ir.alias in bound:
                raise _fail(lr, f"alias {ir.alias!r} bound twice")
            alternatives_pos.append([*positives, ir])
    else:
        alternatives_pos.append(positives)
    alternatives = []
    for alt in alternatives_pos:
        scope = {p.alias: p.fact_type for p in alt}
        negatives = []
        for k, pat in enumerate(rule.when.none):
            negatives.append(_compile_pattern(lr, pat, k, dict(scope), regexes, negative=True,
                                              loc=("when", "none", k)))
        if len(alt) + len(negatives) > MAX_PATTERNS:
            raise _fail(lr, f"{len(alt) + len(negatives)} patterns; the engine allows {MAX_PATTERNS}")
        alternatives.append(Alternative(tuple(alt), tuple(negatives)))
    # Templates and strength may only use aliases bound in every alternative.
    common = set.intersection(*({p.alias for p in a.positives} for a in alternatives))
    common_types = {p.alias: p.fact_type for p in alternatives[0].positives if p.alias in common}
    texts = [("explanation", rule.explanation.en, ("explanation",)),
             ("explanation.zh", rule.explanation.zh or "", ("explanation",))]
    for i, step in enumerate(rule.next_steps):
        texts.append((f"next_steps[{i}].command", step.command or "", ("next_steps", i, "command")))
        texts.append((f"next_steps[{i}].action", step.action.en, ("next_steps", i, "action")))
    for where, text, tloc in texts:
        for m in PLACEHOLDER.finditer(text):
            alias, fname = m.group(1), m.group(2)
            if alias not in common_types:
                raise _fail(lr, f"{where}: placeholder {{{alias}.{fname}}} uses an alias not bound in every alternative", *tloc)
            if fname not in REGISTRY[common_types[alias]].fields:
                raise _fail(lr, f"{where}: placeholder {{{alias}.{fname}}}: {common_types[alias]!r} has no field {fname!r}", *tloc)
    if rule.strength:
        alias, fname = rule.strength.field.split(".", 1)
        if alias not in common_types or fname not in REGISTRY[common_types[alias]].fields:
            raise _fail(lr, f"strength.from {rule.strength.field!r} is not a bound field")
        if REGISTRY[common_types[alias]].fields[fname].kind not in ("number", "integer"):
            raise _fail(lr, f"strength.from {rule.strength.field!r} is not numeric")
    return CompiledRule(rule=rule, path=lr.path, line=lr.line, alternatives=tuple(alternatives))


def compile_rules(loaded: list[LoadedRule], known_modes: set[str] | None = None) -> CompiledPack:
    regexes: list = []
    rules = [compile_rule(lr, regexes, known_modes) for lr in loaded]
    rules.sort(key=lambda r: r.id)
    for i, r in enumerate(rules):
        if i > MAX_PRIORITY:
            raise PrecdxError(f"too many rules ({len(rules)}) for one ruleset")
        r.priority = i
    import hashlib
    digest = hashlib.sha1("\n".join(f"{r.id}:{r.rule.model_dump_json()}" for r in rules).encode()).hexdigest()[:12]
    return CompiledPack(rules=rules, regexes=regexes, version=digest)
