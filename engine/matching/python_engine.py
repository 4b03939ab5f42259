"""Plain-Python evaluation of the compiled rule IR: the reference semantics (oracle for the
durable back end), stateless and thread-safe. Also finds near misses (rules one condition short).

Semantics, shared with the durable back end:
- a missing (or non-finite) field makes every comparison false, `ne` and `not_in` included;
- `exists` is true when the field has a finite value or any string/bool; `nonfinite` tests
  the NaN/Inf flag; a fact binds at most one pattern of a firing (distinct);
- one firing per distinct combination of facts per alternative; `none` patterns reject a
  combination when any fact matches them (they may reference bound aliases).
"""
from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from precdx.facts import NONFINITE_SUFFIX, Fact, match_dict
from precdx.matching.base import Firing
from precdx.rulepack.compiler import Alternative, CompiledPack, CompiledRule, PatternIR, Test

_CMP = {"eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le,
        "gt": operator.gt, "ge": operator.ge}


def _same_kind(a: Any, b: Any) -> bool:
    num = (int, float)
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool)
    if isinstance(a, num) and isinstance(b, num):
        return True
    return type(a) is type(b)


def eval_test(test: Test, d: dict, env: dict[str, dict], regexes: list) -> bool:
    present = test.field in d
    op = test.op
    if op == "exists":
        return present is test.value
    if op == "nonfinite":
        flagged = (test.field + NONFINITE_SUFFIX) in d
        return flagged if test.value else present
    if not present:
        return False
    left = d[test.field]
    if op == "matches":
        return bool(regexes[test.regex_id][2].fullmatch(left))
    if op == "in":
        return any(_same_kind(left, v) and left == v for v in test.value)
    if op == "not_in":
        return all(_same_kind(left, v) and left != v for v in test.value)
    if test.ref is not None:
        other = env.get(test.ref[0], d)
        if test.ref[1] not in other:
            return False
        right = other[test.ref[1]]
        if test.scale is not None:
            right = right * test.scale
    else:
        right = test.value
    if not _same_kind(left, right):
        return False
    return _CMP[op](left, right)


@dataclass
class _Prepared:
    dicts: list[dict]
    by_type: dict[str, list[int]]


def prepare(facts: Sequence[Fact]) -> _Prepared:
    dicts = [match_dict(f) for f in facts]
    by_type: dict[str, list[int]] = {}
    for i, d in enumerate(dicts):
        by_type.setdefault(d["type"], []).append(i)
    return _Prepared(dicts, by_type)


def _literal(tests: Iterable[Test]) -> list[Test]:
    return [t for t in tests if t.ref is None]


def match_alternative(alt: Alternative, prep: _Prepared, regexes: list,
                      skip: tuple[int, int] | None = None, drop_negative: int | None = None,
                      drop_pattern: int | None = None) -> list[tuple[tuple[str, int], ...]]:
    """All bindings of one alternative. `skip=(pattern, test)` drops one positive test,
    `drop_negative` one negative pattern, `drop_pattern` one positive pattern (near misses)."""
    positives = [p for i, p in enumerate(alt.positives) if i != drop_pattern]
    tests_of: list[list[Test]] = []
    for i, p in enumerate(alt.positives):
        if i == drop_pattern:
            continue
        tests = list(p.tests)
        if skip is not None and skip[0] == i:
            tests = [t for j, t in enumerate(tests) if j != skip[1]]
        tests_of.append(tests)
    dropped_alias = alt.positives[drop_pattern].alias if drop_pattern is not None else None
    # alpha filter: literal tests (and self-references) per pattern
    candidates: list[list[int]] = []
    for p, tests in zip(positives, tests_of):
        lits = [t for t in tests if t.ref is None or t.ref[0] == p.alias]
        cands = []
        for idx in prep.by_type.get(p.fact_type, ()):
            d = prep.dicts[idx]
            if all(eval_test(t, d, {p.alias: d}, regexes) for t in lits):
                cands.append(idx)
        if not cands:
            return []
        candidates.append(cands)
    negatives = [n for k, n in enumerate(alt.negatives) if k != drop_negative]
    results: list[tuple[tuple[str, int], ...]] = []

    def joins_ok(k: int, env: dict[str, dict]) -> bool:
        p, tests = positives[k], tests_of[k]
        d = env[p.alias]
        for t in tests:
            if t.ref is not None and t.ref[0] != p.alias:
                if t.ref[0] == dropped_alias:
                    continue  # the referenced pattern was relaxed away
                if not eval_test(t, d, env, regexes):
                    return False
        return True

    def negated(env: dict[str, dict]) -> bool:
        for n in negatives:
            for idx in prep.by_type.get(n.fact_type, ()):
                d = prep.dicts[idx]
                local = dict(env)
                local[n.alias] = d
                if all(t.ref is not None and t.ref[0] == dropped_alias or eval_test(t, d, local, regexes)
                       for t in n.tests):
                    return True
        return False

    def walk(k: int, env: dict[str, dict], used: list[int]) -> None:
        if k == len(positives):
            if not negated(env):
                results.append(tuple(sorted(zip((p.alias for p in positives), used))))
            return
        p = positives[k]
        for idx in candidates[k]:
            if idx in used:
                continue
            env[p.alias] = prep.dicts[idx]
            if joins_ok(k, env):
                used.append(idx)
                walk(k + 1, env, used)
                used.pop()
            del env[p.alias]

    walk(0, {}, [])
    return results


def rule_firings(rule: CompiledRule, prep: _Prepared, regexes: list) -> list[Firing]:
    out = set()
    for a, alt in enumerate(rule.alternatives):
        for binding in match_alternative(alt, prep, regexes):
            out.add(Firing(rule.id, a, binding))
    return sorted(out)


class PythonMatcher:
    name = "python"

    def __init__(self, pack: CompiledPack) -> None:
        self.pack = pack

    def run(self, facts: Sequence[Fact]) -> list[Firing]:
        prep = prepare(facts)
        out: list[Firing] = []
        for rule in self.pack.rules:
            out.extend(rule_firings(rule, prep, self.pack.regexes))
        return sorted(out)

    def close(self) -> None:
        pass


# ---------------------------------------------------------------- near misses
@dataclass(frozen=True)
class NearMiss:
    rule_id: str
    missing: str          # the condition that failed, in rule terms
    kind: str             # "condition" | "blocked_by" | "missing_fact"
    fact_type: str
    field: str | None = None


def near_misses_reference(pack: CompiledPack, facts: Sequence[Fact], fired: set[str]) -> list[NearMiss]:
    """The plain form of `near_misses` (every relaxation enumerates all bindings with
    `match_alternative`): the oracle the fast path is tested against."""
    prep = prepare(facts)
    out: list[NearMiss] = []
    for rule in pack.rules:
        if rule.id in fired:
            continue
        found: NearMiss | None = None
        for alt in rule.alternatives:
            for i, p in enumerate(alt.positives):
                for j, t in enumerate(p.tests):
                    if match_alternative(alt, prep, pack.regexes, skip=(i, j)):
                        found = NearMiss(rule.id, f"{p.fact_type}.{t.describe()}", "condition", p.fact_type, t.field)
                        break
                if found:
                    break
            if not found:
                for k, n in enumerate(alt.negatives):
                    if match_alternative(alt, prep, pack.regexes, drop_negative=k):
                        conds = ", ".join(t.describe() for t in n.tests) or "any"
                        found = NearMiss(rule.id, f"no {n.fact_type} ({conds})", "blocked_by", n.fact_type)
                        break
            if not found and len(alt.positives) > 1:
                for i, p in enumerate(alt.positives):
                    if p.fact_type in prep.by_type:
                        continue
                    if match_alternative(alt, prep, pack.regexes, drop_pattern=i):
                        conds = ", ".join(t.describe() for t in p.tests) or "any"
                        found = NearMiss(rule.id, f"a {p.fact_type} fact ({conds})", "missing_fact", p.fact_type)
                        break
            if found:
                break
        if found:
            out.append(found)
    return out


class _Relaxer:
    """Existence checks of one alternative with one condition relaxed, for `near_misses`.

    Same semantics as `match_alternative` (which enumerates every binding), but it only asks
    whether one binding exists and shares the work between relaxations: each positive pattern's
    literal tests run once per fact of its type, remembering which of them failed (a fact that
    fails two can never be a candidate), so the candidates of "pattern i without test j" are
    the facts whose only failure is j; each negative pattern's literal tests run once, so a
    complete binding only evaluates the negatives' joins."""

    def __init__(self, prep: _Prepared, regexes: list) -> None:
        self.prep = prep
        self.regexes = regexes
        self._fails: dict[int, tuple[list[int], dict[int, int]]] = {}
        self._neg: dict[tuple[int, str | None, frozenset], tuple[PatternIR, list[dict], list[Test]]] = {}
        self._keep: list = []  # keeps the cached patterns alive (their id() stays unique)

    def _literal(self, p: PatternIR, t: Test) -> bool:
        return t.ref is None or t.ref[0] == p.alias

    def pattern_fails(self, p: PatternIR) -> tuple[list[int], dict[int, int]]:
        """(facts passing every literal test, {fact: the one literal test it fails})."""
        hit = self._fails.get(id(p))
        if hit is not None:
            return hit
        lits = [(j, t) for j, t in enumerate(p.tests) if self._literal(p, t)]
        full: list[int] = []
        one: dict[int, int] = {}
        dicts, regexes = self.prep.dicts, self.regexes
        for idx in self.prep.by_type.get(p.fact_type, ()):
            d = dicts[idx]
            env = {p.alias: d}
            failed = -1
            for j, t in lits:
                if not eval_test(t, d, env, regexes):
                    if failed >= 0:
                        failed = -2
                        break
                    failed = j
            if failed == -1:
                full.append(idx)
            elif failed >= 0:
                one[idx] = failed
        self._fails[id(p)] = hit = (full, one)
        self._keep.append(p)
        return hit

    def negative(self, n: PatternIR, dropped: str | None, bound: frozenset) -> tuple[list[dict], list[Test]]:
        """A negative pattern's facts passing the tests that do not depend on the positives'
        bindings, and the tests that do. A reference resolves as in `eval_test` on the env of
        `match_alternative.negated`: the dropped alias passes, the negative's own alias and any
        alias not bound are the fact itself."""
        key = (id(n), dropped, bound)
        hit = self._neg.get(key)
        if hit is not None:
            return hit[1], hit[2]
        literal, joins = [], []
        for t in n.tests:
            if t.ref is not None and t.ref[0] == dropped:
                continue  # relaxed away: always passes
            if t.ref is not None and t.ref[0] != n.alias and t.ref[0] in bound:
                joins.append(t)
            else:
                literal.append(t)
        dicts, regexes = self.prep.dicts, self.regexes
        cands = []
        for idx in self.prep.by_type.get(n.fact_type, ()):
            d = dicts[idx]
            env = {n.alias: d}
            if all(eval_test(t, d, env, regexes) for t in literal):
                cands.append(d)
        self._neg[key] = (n, cands, joins)
        self._keep.append(n)
        return cands, joins

    def exists(self, alt: Alternative, skip: tuple[int, int] | None = None, drop_negative: int | None = None,
               drop_pattern: int | None = None) -> bool:
        dropped = alt.positives[drop_pattern].alias if drop_pattern is not None else None
        positives: list[PatternIR] = []
        candidates: list[list[int]] = []
        joins_of: list[list[Test]] = []
        for i, p in enumerate(alt.positives):
            if i == drop_pattern:
                continue
            full, one = self.pattern_fails(p)
            sj = skip[1] if skip is not None and skip[0] == i else -1
            if sj >= 0 and self._literal(p, p.tests[sj]):
                cands = full + [idx for idx, j in one.items() if j == sj]
            else:
                cands = full
            if not cands:
                return False
            positives.append(p)
            candidates.append(cands)
            joins_of.append([t for j, t in enumerate(p.tests)
                             if j != sj and not self._literal(p, t) and t.ref[0] != dropped])
        bound = frozenset(p.alias for p in positives)
        negs = [self.negative(n, dropped, bound) for k, n in enumerate(alt.negatives) if k != drop_negative]
        if any(cands and not joins for cands, joins in negs):
            return False   # a negative that depends on no binding rejects every complete binding
        dicts, regexes = self.prep.dicts, self.regexes
        n_pos = len(positives)
        # an equality join to an alias bound earlier looks its partners up in a hash index
        seen: set[str] = set()
        probes: list[Test | None] = []
        for p, joins in zip(positives, joins_of):
            probes.append(next((t for t in joins if t.op == "eq" and t.ref[0] in seen), None))
            seen.add(p.alias)
        neg_probes = [next((t for t in joins if t.op == "eq"), None) for _, joins in negs]
        indexes: dict[int, dict] = {}
        neg_indexes: dict[int, dict] = {}
        used: list[int] = []
        env: dict[str, dict] = {}

        def negated() -> bool:
            for m, (cands, joins) in enumerate(negs):
                if not joins:
                    if cands:
                        return True
                    continue
                probe = neg_probes[m]
                if probe is not None:
                    index = neg_indexes.get(m)
                    if index is None:
                        neg_indexes[m] = index = _eq_index(cands, probe.field, lambda d: d)
                    cands = _eq_lookup(index, probe, env)
                for d in cands:
                    for t in joins:  # every join refers to a bound positive: env has it
                        if not eval_test(t, d, env, regexes):
                            break
                    else:
                        return True
            return False

        def walk(k: int) -> bool:
            if k == n_pos:
                return not negated()
            p, joins, cands = positives[k], joins_of[k], candidates[k]
            probe = probes[k]
            if probe is not None:
                index = indexes.get(k)
                if index is None:
                    indexes[k] = index = _eq_index(cands, probe.field, dicts.__getitem__)
                cands = _eq_lookup(index, probe, env)
            for idx in cands:
                if idx in used:
                    continue
                d = dicts[idx]
                env[p.alias] = d
                if all(eval_test(t, d, env, regexes) for t in joins):
                    used.append(idx)
                    if walk(k + 1):
                        return True
                    used.pop()
                del env[p.alias]
            return False

        return walk(0)


def _eq_key(v: Any) -> tuple:
    """Equal keys exactly when `eval_test` finds the values equal (`_same_kind` and ==)."""
    if isinstance(v, bool):
        return (bool, v)
    if isinstance(v, (int, float)):
        return (float, v)
    return (type(v), v)


def _eq_index(items: list, field: str, get) -> dict[tuple, list]:
    index: dict[tuple, list] = {}
    for item in items:
        d = get(item)
        if field in d:
            index.setdefault(_eq_key(d[field]), []).append(item)
    return index


def _eq_lookup(index: dict[tuple, list], probe: Test, env: dict[str, dict]) -> list:
    other = env[probe.ref[0]]
    if probe.ref[1] not in other:
        return []
    right = other[probe.ref[1]]
    if probe.scale is not None:
        right = right * probe.scale
    return index.get(_eq_key(right), [])


def near_misses(pack: CompiledPack, facts: Sequence[Fact], fired: set[str]) -> list[NearMiss]:
    """Rules that did not fire but would with one condition relaxed: for each such rule the
    first of, per alternative, one positive test dropped, one negative pattern dropped, one
    positive pattern whose fact type is absent dropped. Equal to `near_misses_reference`."""
    prep = prepare(facts)
    rx = _Relaxer(prep, pack.regexes)
    out: list[NearMiss] = []
    for rule in pack.rules:
        if rule.id in fired:
            continue
        found: NearMiss | None = None
        for alt in rule.alternatives:
            for i, p in enumerate(alt.positives):
                for j, t in enumerate(p.tests):
                    if rx.exists(alt, skip=(i, j)):
                        found = NearMiss(rule.id, f"{p.fact_type}.{t.describe()}", "condition", p.fact_type, t.field)
                        break
                if found:
                    break
            if not found:
                for k, n in enumerate(alt.negatives):
                    if rx.exists(alt, drop_negative=k):
                        conds = ", ".join(t.describe() for t in n.tests) or "any"
                        found = NearMiss(rule.id, f"no {n.fact_type} ({conds})", "blocked_by", n.fact_type)
                        break
            if not found and len(alt.positives) > 1:
                for i, p in enumerate(alt.positives):
                    if p.fact_type in prep.by_type:
                        continue
                    if rx.exists(alt, drop_pattern=i):
                        conds = ", ".join(t.describe() for t in p.tests) or "any"
                        found = NearMiss(rule.id, f"a {p.fact_type} fact ({conds})", "missing_fact", p.fact_type)
                        break
            if found:
                break
        if found:
            out.append(found)
    return out
