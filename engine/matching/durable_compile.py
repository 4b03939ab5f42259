"""Translate the matcher IR into durable-rules rulesets with the reference semantics, and check
the engine's limits before the C code sees them.

How the engine's traps are neutralised (see ../shared/durable-rules-notes.md):
- `any` is already one IR alternative per branch; each becomes its own engine rule.
- `none`: the engine's negation is not retroactive, and a type may be positive and negative in
  one rule, so negative patterns match *shadow* copies (`__neg__<type>`) asserted first.
- Non-finite numbers are left out of the fact (only `<field>__nonfinite` is sent), so a
  comparison on them is false like on a missing field. A join whose referenced field is absent
  aborts the engine's batch (error 311), so every referenced field is guarded with `$ex`; for a
  negative pattern that guard is a case split (field usable: negation applies; field absent or
  non-finite: the join is false, so the negative pattern cannot match and is dropped).
- `$or` (membership tests) only ever comes after a pattern's joins: placed before a join it
  makes the engine skip that join. A pattern's joins end with one that always holds: a false
  last join makes the engine read past the end of its expression list (a segfault).
- The engine pairs equality joins by the "%f" text of both sides, so -0.0 is sent as 0.0 and a
  scaled numeric equality (whose product may be -0.0) becomes `>=` and `<=`.
- Regex tests are computed in Python into a boolean flag field (the engine's regex dialect
  differs); literals never compare a string with a number (the IR compiler typed them).
- Alpha fan-out: one fact may satisfy at most 64 alpha nodes of a ruleset at once (error 303);
  rules are spread over several rulesets (shards) so no fact type exceeds the budget.
"""
from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass, field, replace
from typing import Any

from precdx.errors import PrecdxError
from precdx.facts import NONFINITE_SUFFIX, REGISTRY
from precdx.matching.durable_serial import MAX_EXACT_INT, check_property_hashes, dumps
from precdx.rulepack.compiler import (MAX_JOINS_PER_PATTERN, MAX_PATTERNS, MAX_PRIORITY,
                                      Alternative, CompiledPack, CompiledRule, PatternIR, Test)

NEG_PREFIX = "__neg__"
END_TYPE = "__end__"
END_RULE = "__end__"
RULE_CAP = 1000            # frames handed over per action call
MAX_ALPHA_STACK = 64       # engine: MAX_STACK_SIZE
ALPHA_BUDGET = 60          # what a shard may use of it (margin for the model)
MAX_PROPERTIES = 255       # engine: error 302 above this
MAX_RULES_PER_SHARD = 4000  # engine: MAX_ACTIONS 4096
MAX_CHILDREN = 400         # engine: a node's children live in a 512-slot hash set
MAX_NEG_CASES = 6          # at most 2**6 case splits per alternative
MAX_EXPRESSIONS = 31       # engine: a pattern's beta expression list (error 113 above)
NUMERIC = ("number", "integer")
_OPS = {"ne": "$neq", "lt": "$lt", "le": "$lte", "gt": "$gt", "ge": "$gte"}


# ---------------------------------------------------------------- condition steps
@dataclass(frozen=True)
class Cond:
    """One engine condition on one fact: the JSON object, a key for node sharing, and an
    exclusivity group (conditions of one group can never hold together)."""

    obj: dict
    key: str
    group: str | None = None


@dataclass(frozen=True)
class OneOf:
    """A disjunction (`$or`) of mutually exclusive conditions (the engine fires once per
    matching option, so options must exclude each other)."""

    options: tuple[Cond, ...]


Step = Cond | OneOf
NEVER = None  # a test no fact can pass


def _cond(obj: dict, group: str | None = None) -> Cond:
    return Cond(obj, dumps(obj), group)


def _exists(name: str) -> Cond:
    return _cond({"$ex": {name: 1}})


def _absent(name: str) -> Cond:
    return _cond({"$nex": {name: 1}}, f"v:{name}")


def _eq(name: str, value: Any) -> Cond:
    return _cond({name: value}, f"v:{name}")


@dataclass(frozen=True)
class RegexFlag:
    """A boolean field computed in Python: does `field` fully match `pattern`."""

    name: str
    field: str
    pattern: re.Pattern


@dataclass
class TypePlan:
    """What of one fact type is sent to the engine."""

    fact_type: str
    fields: dict[str, str] = field(default_factory=dict)  # projected field -> kind
    regex_flags: list[RegexFlag] = field(default_factory=list)
    positive: bool = False
    shadow: bool = False

    def property_names(self) -> list[str]:
        names = ["sid", "id", "type", *self.fields]
        names += [f + NONFINITE_SUFFIX for f, k in self.fields.items() if k in NUMERIC]
        names += [r.name for r in self.regex_flags]
        return names


@dataclass(frozen=True)
class PatternPath:
    """The alpha chain of one engine pattern (for the fan-out model)."""

    engine_type: str
    steps: tuple[Step, ...]


@dataclass(frozen=True)
class EngineRule:
    name: str
    rule_id: str
    alternative: int
    aliases: dict[str, str]  # engine pattern name -> rule alias (positive patterns)
    definition: dict
    paths: tuple[PatternPath, ...]


@dataclass
class Program:
    shards: list[list[EngineRule]]
    plans: dict[str, TypePlan]
    texts: list[str] = field(default_factory=list)  # each shard's ruleset definition (JSON for the engine)

    def without_paths(self) -> "Program":
        """The program as a matcher runs it: without the alpha chains, which only sharding
        reads (what the on-disk cache keeps; half the size, a third of the load time)."""
        shards = [[replace(r, paths=()) for r in rules] for rules in self.shards]
        return Program(shards=shards, plans=self.plans, texts=self.texts)


# ---------------------------------------------------------------- translation
class _Translator:
    def __init__(self, pack: CompiledPack) -> None:
        self.pack = pack
        self.plans: dict[str, TypePlan] = {}
        self._regex_names: dict[tuple, str] = {}

    def plan(self, fact_type: str) -> TypePlan:
        if fact_type not in self.plans:
            self.plans[fact_type] = TypePlan(fact_type)
        return self.plans[fact_type]

    def use_field(self, rule: CompiledRule, fact_type: str, name: str) -> str:
        spec = REGISTRY[fact_type].fields.get(name)
        if spec is None:
            raise _rule_error(rule, f"fact type {fact_type!r} has no field {name!r}")
        self.plan(fact_type).fields[name] = spec.kind
        return spec.kind

    def regex_flag(self, rule: CompiledRule, fact_type: str, test: Test) -> str:
        if test.regex_id is None or not 0 <= test.regex_id < len(self.pack.regexes):
            raise _rule_error(rule, f"{fact_type}.{test.field}: regex test without a compiled regex")
        rtype, rfield, pattern = self.pack.regexes[test.regex_id]
        if (rtype, rfield) != (fact_type, test.field):
            raise _rule_error(rule, f"{fact_type}.{test.field}: regex {test.regex_id} belongs to {rtype}.{rfield}")
        key = (fact_type, rfield, pattern.pattern, pattern.flags)
        if key not in self._regex_names:
            name = f"__re{len(self._regex_names)}"
            self._regex_names[key] = name
            self.plan(fact_type).regex_flags.append(RegexFlag(name, rfield, pattern))
        return self._regex_names[key]

    # -- literal tests
    def literal(self, rule: CompiledRule, fact_type: str, test: Test) -> list[Step] | None:
        kind = self.use_field(rule, fact_type, test.field)
        numeric = kind in NUMERIC
        name, op, value = test.field, test.op, test.value
        # A non-finite number is absent from the fact, only its flag is sent: `exists` and
        # `nonfinite: false` both mean "a finite value is present".
        if op == "exists":
            return [_exists(name) if value else _absent(name)]
        if op == "nonfinite":
            if not numeric:
                raise _rule_error(rule, f"{fact_type}.{name}: 'nonfinite' on a {kind} field")
            return [_exists(name + NONFINITE_SUFFIX) if value else _exists(name)]
        if op == "matches":
            return [_eq(self.regex_flag(rule, fact_type, test), True)]
        if op in ("in", "not_in"):
            values = [self._scalar(rule, fact_type, name, kind, v) for v in value]
            finite = _dedupe(v for v in values if not _nonfinite(v))
            if op == "in":
                if not finite:
                    return NEVER
                if len(finite) == 1:
                    return [_eq(name, finite[0])]
                return [OneOf(tuple(_eq(name, v) for v in finite))]
            steps: list[Step] = [_cond({"$neq": {name: v}}) for v in finite]
            return steps or [_exists(name)]  # a non-finite value differs from every number
        if op not in ("eq", *_OPS):
            raise _rule_error(rule, f"{fact_type}.{name}: unknown operator {op!r}")
        if op in ("lt", "le", "gt", "ge") and not numeric:
            raise _rule_error(rule, f"{fact_type}.{name}: '{op}' on a {kind} field")
        value = self._scalar(rule, fact_type, name, kind, value)
        if _nonfinite(value):
            # Only finite numbers reach a comparison; decide it now.
            holds = {"eq": False, "ne": True, "lt": value > 0, "le": value > 0,
                     "gt": value < 0, "ge": value < 0}[op] if not math.isnan(value) else op == "ne"
            return [_exists(name)] if holds else NEVER
        if op == "eq":
            return [_eq(name, value)]
        return [_cond({_OPS[op]: {name: value}})]

    def _scalar(self, rule: CompiledRule, fact_type: str, name: str, kind: str, value: Any) -> Any:
        ok = ((kind == "string" and isinstance(value, str))
              or (kind == "boolean" and isinstance(value, bool))
              or (kind in NUMERIC and isinstance(value, (int, float)) and not isinstance(value, bool)))
        if not ok:
            raise _rule_error(rule, f"{fact_type}.{name}: value {value!r} does not fit a {kind} field")
        if kind in NUMERIC:
            if isinstance(value, int) and abs(value) > MAX_EXACT_INT:
                raise _rule_error(rule, f"{fact_type}.{name}: integer {value} is too large for the durable engine")
            return float(value)
        return value


def _nonfinite(v: Any) -> bool:
    return isinstance(v, float) and not math.isfinite(v)


def _dedupe(values) -> list:
    out: list = []
    for v in values:
        if not any(v == w for w in out):
            out.append(v)
    return out


def _rule_error(rule: CompiledRule, message: str) -> PrecdxError:
    return PrecdxError(f"rule {rule.id}: {message} (durable engine)", path=rule.path, line=rule.line,
                       hint="simplify the rule or run with --engine python", exit_code=3)


def _check_shape(rule: CompiledRule) -> None:
    if not 0 <= rule.priority <= MAX_PRIORITY:
        raise _rule_error(rule, f"priority {rule.priority} outside 0..{MAX_PRIORITY}")
    if not rule.alternatives:
        raise _rule_error(rule, "no alternatives")
    for alt in rule.alternatives:
        if not alt.positives:
            raise _rule_error(rule, "an alternative without positive patterns")
        n = len(alt.positives) + len(alt.negatives)
        if n > MAX_PATTERNS:
            raise _rule_error(rule, f"{n} patterns; the engine allows {MAX_PATTERNS}")
        aliases = [p.alias for p in alt.positives]
        if len(set(aliases)) != len(aliases):
            raise _rule_error(rule, "an alias is bound twice")
        for p in (*alt.positives, *alt.negatives):
            if p.fact_type not in REGISTRY:
                raise _rule_error(rule, f"unknown fact type {p.fact_type!r}")
            joins = sum(1 for t in p.tests if t.ref is not None)
            if joins > MAX_JOINS_PER_PATTERN:
                raise _rule_error(rule, f"pattern {p.alias!r}: {joins} joins; the engine allows {MAX_JOINS_PER_PATTERN}")


def _translate_alternative(tr: _Translator, rule: CompiledRule, index: int, alt_no: int,
                           alt: Alternative) -> list[EngineRule]:
    pos_names = {p.alias: f"p{k}" for k, p in enumerate(alt.positives)}
    pos_types = {p.alias: p.fact_type for p in alt.positives}
    for p in alt.positives:
        tr.plan(p.fact_type).positive = True
    for n in alt.negatives:
        tr.plan(n.fact_type).shadow = True

    def build(pattern: PatternIR, negative: bool):
        """(literal steps, join steps, self guards, external refs) or None when it can never match."""
        literal: list[Step] = []
        joins: list[Cond] = []
        guards: set[str] = set()
        external: set[tuple[str, str]] = set()
        for t in pattern.tests:
            if t.ref is None:
                steps = tr.literal(rule, pattern.fact_type, t)
                if steps is NEVER:
                    return None
                literal.extend(steps)
                continue
            kind = tr.use_field(rule, pattern.fact_type, t.field)
            ralias, rfield = t.ref
            if ralias == pattern.alias:
                rkind = tr.use_field(rule, pattern.fact_type, rfield)
                ref: dict = {"$m": rfield}
                guards.add(rfield)
            elif ralias in pos_names:
                rkind = tr.use_field(rule, pos_types[ralias], rfield)
                ref = {pos_names[ralias]: rfield}
                external.add((ralias, rfield))
            else:
                raise _rule_error(rule, f"pattern {pattern.alias!r}: reference to unbound alias {ralias!r}")
            numeric = kind in NUMERIC
            if numeric != (rkind in NUMERIC) or (not numeric and kind != rkind):
                raise _rule_error(rule, f"pattern {pattern.alias!r}: cannot join {kind} with {rkind}")
            if t.op in ("lt", "le", "gt", "ge") and not numeric:
                raise _rule_error(rule, f"pattern {pattern.alias!r}: '{t.op}' join on {kind} fields")
            if t.scale is not None:
                if not numeric or not math.isfinite(t.scale):
                    raise _rule_error(rule, f"pattern {pattern.alias!r}: scale {t.scale!r} needs numeric fields and a finite number")
                ref = {"$mul": {"$l": ref, "$r": float(t.scale)}}
            if t.op == "eq" and numeric and t.scale is not None:
                # The engine finds equality-join partners by the "%f" text of both sides; a
                # computed side can be -0.0 ("-0.000000"), so compare as >= and <= instead.
                joins.append(_cond({"$gte": {t.field: ref}}))
                joins.append(_cond({"$lte": {t.field: ref}}))
            elif t.op == "eq":
                joins.append(_cond({t.field: ref}))
            else:
                joins.append(_cond({_OPS[t.op]: {t.field: ref}}))
        if joins:
            # Always-true last join (every fact of a request carries the same sid): when the
            # last join of an `$and` is false the engine skips past the group's end marker and
            # reads beyond the expression list (seen as segfaults in reduceExpressionSequence).
            first = not negative and pattern.alias == alt.positives[0].alias
            joins.append(_cond({"$gte": {"sid": {"$m": "sid"} if first else {"p0": "sid"}}}))
        return literal, joins, guards, external

    positives = []
    for p in alt.positives:
        built = build(p, False)
        if built is None:
            return []  # a positive pattern no fact can match: this alternative never fires
        positives.append(built)
    forced: dict[str, set[str]] = {p.alias: set(g) for p, (_, _, g, _) in zip(alt.positives, positives)}
    for _, _, _, external in positives:
        for ralias, rfield in external:
            forced[ralias].add(rfield)
    negatives = []
    for n in alt.negatives:
        built = build(n, True)
        if built is not None:  # a negative pattern no fact can match blocks nothing
            negatives.append((n, built))
    open_refs = sorted({r for _, (_, _, _, ext) in negatives for r in ext if r[1] not in forced[r[0]]})
    if len(open_refs) > MAX_NEG_CASES:
        raise _rule_error(rule, f"'none' patterns join {len(open_refs)} fields of bound facts; the durable "
                                f"back end handles at most {MAX_NEG_CASES}")

    def steps_of(fact_type: str, literal: list[Step], present: set[str], absent: set[str],
                 joins: list[Cond]) -> list[Step]:
        ors = [s for s in literal if isinstance(s, OneOf)]
        length = 2 + len(joins) + 2 * len(ors)  # the pattern's beta expression list
        if length > MAX_EXPRESSIONS:
            raise _rule_error(rule, f"a {fact_type.removeprefix(NEG_PREFIX)} pattern needs {length} engine "
                                    f"expressions (joins, membership tests); the engine allows {MAX_EXPRESSIONS}")
        singles = [s for s in literal if isinstance(s, Cond)]
        singles += [_exists(f) for f in present] + [_absent(f) for f in absent]
        singles = sorted({s.key: s for s in singles}.values(), key=lambda s: s.key)
        # joins before any `$or`: an `$or` ahead of a join makes the engine skip the join
        return [_eq("type", fact_type), *singles, *joins, *ors]

    out: list[EngineRule] = []
    for case_no, usable in enumerate(itertools.product((True, False), repeat=len(open_refs))):
        case = dict(zip(open_refs, usable))
        entries: list[dict] = []
        paths: list[PatternPath] = []
        for k, (p, (literal, joins, _, _)) in enumerate(zip(alt.positives, positives)):
            present = forced[p.alias] | {f for (a, f), ok in case.items() if a == p.alias and ok}
            absent = {f for (a, f), ok in case.items() if a == p.alias and not ok}
            steps = steps_of(p.fact_type, literal, present, absent, joins)
            paths.append(PatternPath(p.fact_type, tuple(steps)))
            entries.append({f"p{k}": _pattern_json(steps)})
        for k, (n, (literal, joins, guards, external)) in enumerate(negatives):
            if not all(case.get(r, True) for r in external):
                continue  # a referenced field is absent: the join is false, nothing is negated
            shadow = NEG_PREFIX + n.fact_type
            steps = steps_of(shadow, literal, guards, set(), joins)
            paths.append(PatternPath(shadow, tuple(steps)))
            entries.append({f"n{k}$not": _pattern_json(steps)})
        name = f"r{index}_{alt_no}_{case_no}"
        definition = {"pri": rule.priority, "cap": RULE_CAP, "all": entries}
        aliases = {f"p{k}": p.alias for k, p in enumerate(alt.positives)}
        out.append(EngineRule(name, rule.id, alt_no, aliases, definition, tuple(paths)))
    return out


def _pattern_json(steps: list[Step]) -> dict:
    objs = [s.obj if isinstance(s, Cond) else {"$or": [o.obj for o in s.options]} for s in steps]
    return objs[0] if len(objs) == 1 else {"$and": objs}


# ---------------------------------------------------------------- alpha fan-out model
class _Node:
    __slots__ = ("children", "groups", "betas")

    def __init__(self) -> None:
        self.children: dict[str, _Node] = {}
        self.groups: dict[str, str | None] = {}
        self.betas = 0


class AlphaModel:
    """The engine's alpha network as a trie (identical conditions under one parent share a
    node, as `findAlpha` does), to bound how many nodes one fact can push at once.

    When a node is popped its matching children are pushed, then handled last-in first-out,
    so the peak stack of a subtree is S(node) = max(1, K - 1 + max S(child)), K being the number
    of children that can match together (conditions of one exclusivity group count once)."""

    def __init__(self) -> None:
        self.roots: dict[str, _Node] = {}  # engine type -> the `type == T` node
        self._forward = itertools.count()

    def add(self, path: PatternPath) -> None:
        root = self.roots.setdefault(path.engine_type, _Node())
        self._insert(root, path.steps[1:])

    def _insert(self, node: _Node, steps: tuple[Step, ...]) -> None:
        if not steps:
            node.betas += 1
            return
        step, rest = steps[0], steps[1:]
        options = step.options if isinstance(step, OneOf) else (step,)
        for cond in options:
            child = node.children.get(cond.key)
            if child is None:
                child = node.children[cond.key] = _Node()
                node.groups[cond.key] = cond.group
            if isinstance(step, OneOf):
                # each `$or` gets its own forward node that the rest of the chain hangs from
                key = f"F{next(self._forward)}"
                forward = child.children[key] = _Node()
                child.groups[key] = None
                self._insert(forward, rest)
            else:
                self._insert(child, rest)

    @staticmethod
    def peak(node: _Node) -> int:
        if not node.children:
            return 1
        groups = {g for g in node.groups.values() if g is not None}
        k = sum(1 for g in node.groups.values() if g is None) + len(groups)
        return max(1, k - 1 + max(AlphaModel.peak(c) for c in node.children.values()))

    def widest(self, node: _Node) -> int:
        return max([len(node.children), node.betas] + [self.widest(c) for c in node.children.values()])

    def check(self, engine_type: str) -> tuple[int, int]:
        root = self.roots[engine_type]
        return self.peak(root), self.widest(root)


# ---------------------------------------------------------------- whole pack
class _Shard:
    def __init__(self) -> None:
        self.rules: list[EngineRule] = []
        self.model = AlphaModel()

    def try_add(self, rules: list[EngineRule], budget: int) -> str:
        """Add `rules` if the shard stays within the engine's limits and return ""; otherwise
        leave the shard as it was and return why they do not fit."""
        types = set()
        for r in rules:
            for p in r.paths:
                self.model.add(p)
                types.add(p.engine_type)
        why = ""
        for t in sorted(types):
            peak, wide = self.model.check(t)
            plain = t.removeprefix(NEG_PREFIX)
            if peak > budget:
                why = (f"a {plain} fact could satisfy {peak} alpha conditions at once "
                       f"(engine limit {MAX_ALPHA_STACK}, budget {budget})")
                break
            if wide > MAX_CHILDREN:
                why = f"{wide} conditions hang from one alpha node of {plain} (limit {MAX_CHILDREN})"
                break
        if not why and len(self.rules) + len(rules) + 1 > MAX_RULES_PER_SHARD:
            why = f"more than {MAX_RULES_PER_SHARD} engine rules"
        if why:
            self.model = AlphaModel()
            for r in self.rules:
                for p in r.paths:
                    self.model.add(p)
        else:
            self.rules.extend(rules)
        return why


def compile_program(pack: CompiledPack, *, alpha_budget: int = ALPHA_BUDGET) -> Program:
    """Translate and shard a compiled pack. Raises PrecdxError naming the rule on any limit."""
    for name in REGISTRY:
        if name.startswith(NEG_PREFIX) or name == END_TYPE:
            raise PrecdxError(f"fact type name {name!r} is reserved by the durable back end", exit_code=3)
    tr = _Translator(pack)
    per_rule: list[tuple[CompiledRule, list[EngineRule]]] = []
    for index, rule in enumerate(pack.rules):
        _check_shape(rule)
        engine_rules: list[EngineRule] = []
        for alt_no, alt in enumerate(rule.alternatives):
            engine_rules.extend(_translate_alternative(tr, rule, index, alt_no, alt))
        per_rule.append((rule, engine_rules))
        # fields, flags and the engine's own sid/id/type, as far as the rules so far need them
        for t in {p.fact_type for alt in rule.alternatives for p in (*alt.positives, *alt.negatives)}:
            names = tr.plans[t].property_names()
            if len(names) > MAX_PROPERTIES:
                raise _rule_error(rule, f"facts of type {t!r} would carry {len(names)} properties; "
                                        f"the engine allows {MAX_PROPERTIES}")
    for t, plan in tr.plans.items():
        check_property_hashes(plan.property_names(), f"fact type {t!r}")
    shards: list[_Shard] = []
    for rule, ers in per_rule:
        if not ers:
            continue
        if not any(not shard.try_add(ers, alpha_budget) for shard in shards):
            fresh = _Shard()
            why = fresh.try_add(ers, alpha_budget)
            if why:
                raise _rule_error(rule, why)
            shards.append(fresh)
    return Program(shards=[s.rules for s in shards], plans=tr.plans, texts=[ruleset_json(s.rules) for s in shards])


def ruleset_json(rules: list[EngineRule]) -> str:
    definition = {r.name: r.definition for r in rules}
    definition[END_RULE] = {"all": [{"e": {"type": END_TYPE}}]}
    return dumps(definition)

