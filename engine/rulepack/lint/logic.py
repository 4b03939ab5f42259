"""Logic checks (L0xx): conditions that can never hold, patterns that are implied or redundant,
duplicate rules, facts no collector emits."""
from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from typing import Any

from precdx.facts import FieldSpec, REGISTRY
from precdx.rulepack.lint.base import (
    LintIssue, RuleEntry, Validator, _conds, _fmt_ops, _is_ref, _number, always_present, default_alias,
    is_collectable, issue_type, pattern_lists, rule_fact_needs,
)
from precdx.rulepack.schema import OPERATORS, Rule


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
