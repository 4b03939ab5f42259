"""From facts to a diagnosis: run the matcher, rank failure modes, explain each hypothesis
(contributing firings, evidence, next steps) and derive the verdict. Also the output contract
(pydantic models; `precdx schema` prints their JSON Schema)."""
from __future__ import annotations

import math
import threading
from typing import Any, Literal

from pydantic import BaseModel, Field

from engine import __version__
from engine.errors import Warnings
from engine.facts import Fact, FactSet
from engine.matching import compile_matcher
from engine.matching.base import Firing
from engine.matching.python_engine import near_misses
from engine.ranking import firing_weight, rank, specificity, strength
from engine.rulepack.compiler import PLACEHOLDER, CompiledPack, CompiledRule, Test, compile_rules
from engine.rulepack.loader import load_rules
from engine.rulepack.schema import COST_LABELS, COST_LABELS_ZH

OUTPUT_SCHEMA_VERSION = "1.0"
REPORT_THRESHOLD = 0.25     # hypotheses below this are not reported
MISALIGNED_THRESHOLD = 0.45  # a misaligned top hypothesis at least this strong -> verdict misaligned
ALIGNED_THRESHOLD = 0.4
MAX_EVIDENCE_PER_RULE = 5


# ---------------------------------------------------------------- output contract
class Evidence(BaseModel):
    fact: str = Field(description="fact type and field, e.g. loss_compare.mean_rel_err")
    value: Any = Field(description="the observed value (NaN/Inf as strings)")
    expected: str | None = Field(None, description="what a healthy run shows for this field")
    text: str = Field(description="rendered explanation of the rule firing")
    rule: str = Field(description="id of the rule that produced this evidence")
    source: str | None = Field(None, description="file the fact came from")


class NextStep(BaseModel):
    action: str
    command: str | None = None
    why: str = ""
    cost: Literal["read", "rerun", "dump", "long_run", "cluster"]
    cost_label: str
    rule: str


class RuleRef(BaseModel):
    id: str
    name: str
    weight: float
    supports: bool


class Hypothesis(BaseModel):
    failure_mode: str = Field(description="canonical failure-mode id")
    score: float = Field(ge=0.0, le=1.0)
    title: str
    verdict: str = Field(description="what this mode means for the run pair: misaligned | aligned | tooling")
    rules: list[RuleRef]
    evidence: list[Evidence]
    next_steps: list[NextStep]
    references: list[str]


class Symptom(BaseModel):
    id: str
    title: str
    evidence: list[Evidence]


class NearMissOut(BaseModel):
    rule: str
    failure_modes: list[str]
    missing: str = Field(description="the one condition that was not met")
    kind: str
    text: str


class Diagnosis(BaseModel):
    schema_version: str = OUTPUT_SCHEMA_VERSION
    precdx_version: str = __version__
    verdict: Literal["aligned", "misaligned", "inconclusive"]
    summary: str
    symptoms: list[Symptom]
    hypotheses: list[Hypothesis]
    near_misses: list[NearMissOut]
    facts: list[dict[str, Any]]
    warnings: list[dict[str, Any]]
    engine: str
    rule_pack: str
    lang: str


# ---------------------------------------------------------------- rule pack cache
_lock = threading.Lock()
_packs: dict[tuple[str, str], tuple[CompiledPack, Any]] = {}


def load_pack(rules_path: str | None = None, *, warnings: Warnings | None = None) -> CompiledPack:
    from engine.modes import mode_catalog

    loaded = load_rules(rules_path, warnings=warnings, tolerant=True)
    return compile_rules(loaded, known_modes=set(mode_catalog()) or None)


_pack_warnings: dict[tuple[str, str], Warnings] = {}


def get_matcher(engine: str = "durable", rules_path: str | None = None):
    """The compiled pack and its matcher, cached per (engine, rule folder). Rules of another
    schema_version are skipped with a warning (tolerant runtime; lint stays strict)."""
    key = (engine, str(rules_path or ""))
    with _lock:
        if key not in _packs:
            skipped = Warnings()
            pack = load_pack(rules_path, warnings=skipped)
            _packs[key] = (pack, compile_matcher(pack, engine))
            _pack_warnings[key] = skipped
        return _packs[key]


def pack_warnings(engine: str = "durable", rules_path: str | None = None) -> Warnings:
    return _pack_warnings.get((engine, str(rules_path or "")), Warnings())


def reset_cache() -> None:
    with _lock:
        for _, matcher in _packs.values():
            matcher.close()
        _packs.clear()
        _pack_warnings.clear()


# ---------------------------------------------------------------- rendering helpers
def _fmt_value(v: Any, spec: str | None) -> str:
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    if spec:
        try:
            return format(v, spec)
        except (ValueError, TypeError):
            pass
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def render_template(text: str, bound: dict[str, Fact]) -> str:
    def sub(m) -> str:
        fact = bound.get(m.group(1))
        if fact is None:
            return m.group(0)
        val = getattr(fact, m.group(2), None)
        return "?" if val is None else _fmt_value(val, m.group(3))
    return PLACEHOLDER.sub(sub, text)


_NEGATE = {"gt": "<=", "ge": "<", "lt": ">=", "le": ">", "eq": "!=", "ne": "=="}


def _expected(test: Test) -> str | None:
    if test.ref is not None:
        return None
    if test.op in _NEGATE:
        return f"{_NEGATE[test.op]} {_fmt_value(test.value, None)}"
    if test.op == "in":
        return f"not in {list(test.value)}"
    if test.op == "not_in":
        return f"in {list(test.value)}"
    if test.op == "nonfinite":
        return "finite" if test.value else "non-finite"
    if test.op == "exists":
        return "absent" if test.value else "present"
    return None


def _json_value(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    return v


def _firing_evidence(rule: CompiledRule, firing: Firing, bound: dict[str, Fact], lang: str) -> list[Evidence]:
    text = render_template(rule.rule.explanation.get(lang), bound)
    alt = rule.alternatives[firing.alternative]
    items: list[Evidence] = []
    for p in alt.positives:
        fact = bound[p.alias]
        for t in p.tests:
            numeric = t.op in ("lt", "le", "gt", "ge", "nonfinite") or (
                t.op in ("eq", "ne") and isinstance(t.value, (int, float)) and not isinstance(t.value, bool))
            if not numeric:
                continue
            items.append(Evidence(fact=f"{p.fact_type}.{t.field}", value=_json_value(getattr(fact, t.field, None)),
                                  expected=_expected(t), text=text, rule=rule.id, source=fact.source))
    if not items:
        p = alt.positives[0]
        items.append(Evidence(fact=p.fact_type, value=None, text=text, rule=rule.id, source=bound[p.alias].source))
    # numeric evidence first: it carries thresholds
    items.sort(key=lambda e: (not isinstance(e.value, (int, float)) or isinstance(e.value, bool)))
    return items[:MAX_EVIDENCE_PER_RULE]


def _weight(rule: CompiledRule, bound: dict[str, Fact]) -> float:
    s = 1.0
    spec = rule.rule.strength
    if spec:
        alias, fname = spec.field.split(".", 1)
        val = getattr(bound[alias], fname, None)
        s = strength(val, spec.low, spec.high, log=spec.log, absolute=spec.absolute)
    return firing_weight(rule.rule.precision, s, specificity(rule.condition_count))


# ---------------------------------------------------------------- diagnose
def diagnose(facts: FactSet, *, engine: str = "durable", lang: str = "en", rules_path: str | None = None,
             warnings: Warnings | None = None, with_near_misses: bool = True) -> Diagnosis:
    from engine.modes import mode_catalog

    warnings = warnings or Warnings()
    pack, matcher = get_matcher(engine, rules_path)
    warnings.extend(pack_warnings(engine, rules_path))
    fact_list = list(facts)
    firings = matcher.run(fact_list)
    by_id = pack.by_id()
    catalog = mode_catalog()

    contributions = []
    per_rule_evidence: dict[str, list[Evidence]] = {}
    per_rule_bound: dict[str, list[dict[str, Fact]]] = {}
    symptom_evidence: dict[str, list[Evidence]] = {}
    weights: dict[str, float] = {}
    for firing in firings:
        rule = by_id[firing.rule_id]
        bound = {alias: fact_list[i] for alias, i in firing.bindings}
        ev = _firing_evidence(rule, firing, bound, lang)
        if rule.rule.symptom:
            symptom_evidence.setdefault(rule.rule.symptom, []).extend(ev)
            continue
        w = _weight(rule, bound)
        if w >= weights.get(rule.id, -1):
            weights[rule.id] = w
            per_rule_evidence.setdefault(rule.id, [])
            per_rule_evidence[rule.id] = ev + [e for e in per_rule_evidence[rule.id] if e not in ev]
        else:
            per_rule_evidence[rule.id].extend(e for e in ev if e not in per_rule_evidence[rule.id])
        per_rule_bound.setdefault(rule.id, []).append(bound)
        for mode in rule.rule.failure_modes:
            contributions.append((mode, rule.id, w, True))
        for mode in rule.rule.against:
            contributions.append((mode, rule.id, w, False))

    hypotheses: list[Hypothesis] = []
    for ms in rank(contributions):
        if ms.score < REPORT_THRESHOLD:
            continue
        info = catalog.get(ms.mode)
        rule_refs = [RuleRef(id=r, name=by_id[r].rule.name, weight=round(w, 4), supports=True)
                     for r, w in sorted(ms.support.items(), key=lambda kv: (-kv[1], kv[0]))]
        rule_refs += [RuleRef(id=r, name=by_id[r].rule.name, weight=round(w, 4), supports=False)
                      for r, w in sorted(ms.against.items(), key=lambda kv: (-kv[1], kv[0]))]
        evidence: list[Evidence] = []
        steps: list[NextStep] = []
        seen_steps: set[str] = set()
        refs: list[str] = []
        for rr in rule_refs:
            if not rr.supports:
                continue
            rule = by_id[rr.id]
            evidence.extend(per_rule_evidence.get(rr.id, []))
            bound = per_rule_bound[rr.id][0]
            for st in rule.rule.next_steps:
                action = render_template(st.action.get(lang), bound)
                command = render_template(st.command, bound) if st.command else None
                key = command or action
                if key in seen_steps:
                    continue
                seen_steps.add(key)
                steps.append(NextStep(action=action, command=command,
                                      why=render_template(st.why.get(lang), bound) if st.why else "",
                                      cost=st.cost, cost_label=(COST_LABELS_ZH if lang == "zh" else COST_LABELS)[st.cost],
                                      rule=rule.id))
            for ref in rule.rule.references:
                if ref not in refs:
                    refs.append(ref)
        if info:
            refs += [r for r in info.references if r not in refs]
        # Steps keep the procedural order the rule authors wrote (strongest rule first); each
        # carries its cost class so a planner or reader can reorder by cost.
        first_rule = by_id[rule_refs[0].id].rule
        hypotheses.append(Hypothesis(
            failure_mode=ms.mode, score=ms.score,
            title=info.title(lang) if info else first_rule.title.get(lang),
            verdict=info.verdict if info else "misaligned",
            rules=rule_refs, evidence=evidence, next_steps=steps, references=refs))

    symptoms = []
    for sid, ev in symptom_evidence.items():
        rule = next(r for r in pack.rules if r.rule.symptom == sid)
        symptoms.append(Symptom(id=sid, title=rule.rule.title.get(lang), evidence=ev))
    symptoms.sort(key=lambda s: s.id)

    misses: list[NearMissOut] = []
    if with_near_misses:
        fired = {f.rule_id for f in firings}
        for nm in near_misses(pack, fact_list, fired):
            rule = by_id[nm.rule_id].rule
            if rule.symptom:
                continue
            misses.append(NearMissOut(
                rule=nm.rule_id, failure_modes=list(rule.failure_modes), missing=nm.missing, kind=nm.kind,
                text=(f"{rule.title.get(lang)} — would fire with {nm.missing}" if nm.kind != "blocked_by"
                      else f"{rule.title.get(lang)} — blocked by {nm.missing}")))

    verdict = derive_verdict(hypotheses)
    return Diagnosis(
        verdict=verdict, summary=_summary(verdict, hypotheses, symptoms, lang), symptoms=symptoms,
        hypotheses=hypotheses, near_misses=misses, facts=facts.to_json(), warnings=list(warnings.items),
        engine=matcher.name, rule_pack=pack.version, lang=lang)


def derive_verdict(hypotheses: list[Hypothesis]) -> str:
    if not hypotheses:
        return "inconclusive"
    top = hypotheses[0]
    if top.verdict == "aligned" and top.score >= ALIGNED_THRESHOLD:
        return "aligned"
    if top.verdict == "misaligned" and top.score >= MISALIGNED_THRESHOLD:
        return "misaligned"
    return "inconclusive"


def _summary(verdict: str, hyps: list[Hypothesis], symptoms: list[Symptom], lang: str) -> str:
    zh = lang == "zh"
    sym = ", ".join(s.title for s in symptoms)
    if verdict == "aligned":
        return "精度对齐：差异处于标杆自身波动范围内。" if zh else "Aligned: the gap lies within the baseline's own noise."
    if not hyps:
        return ("证据不足，无法定位；请补充日志、配置或 dump。" if zh
                else "Inconclusive: not enough evidence to name a cause; add logs, configs or dumps.")
    top = hyps[0]
    if zh:
        return f"{'精度不对齐' if verdict == 'misaligned' else '无法定论'}：最可能的原因是 {top.title}（{top.failure_mode}，得分 {top.score:.2f}）" + (f"；症状：{sym}" if sym else "")
    head = "Misaligned" if verdict == "misaligned" else "Inconclusive"
    return f"{head}: most likely {top.title} ({top.failure_mode}, score {top.score:.2f})" + (f"; symptoms: {sym}" if sym else "")
