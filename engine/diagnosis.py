"""From facts to a diagnosis: run the matcher, rank failure modes, explain each hypothesis
(contributing firings, evidence, next steps) and derive the verdict. Also the output contract
(pydantic models; `precdx schema` prints their JSON Schema)."""
from __future__ import annotations

import math
import re
import threading
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from precdx import __version__
from precdx.errors import PrecdxError, Warnings
from precdx.experiments import DIFF_TYPES
from precdx.facts import Fact, FactSet
from precdx.matching import compile_matcher
from precdx.matching.base import Firing
from precdx.matching.python_engine import near_misses
from precdx.ranking import firing_weight, rank, specificity, strength
from precdx.rulepack.devices import applies, run_device
from precdx.rulepack.compiler import PLACEHOLDER, CompiledPack, CompiledRule, Test, compile_rules
from precdx.rulepack.loader import load_rules
from precdx.vocabulary import COST_LABELS, COST_LABELS_ZH, Cost

OUTPUT_SCHEMA_VERSION = "1.0"
REPORT_THRESHOLD = 0.25     # hypotheses below this are not reported
MISALIGNED_THRESHOLD = 0.45  # a misaligned top hypothesis at least this strong -> verdict misaligned
ALIGNED_THRESHOLD = 0.4
MAX_EVIDENCE_PER_RULE = 5


# ---------------------------------------------------------------- output contract
class Evidence(BaseModel):
    fact: str = Field(description="fact type and field, e.g. loss_compare.mean_rel_err")
    role: str | None = Field(None, description="side the fact describes: target, baseline, target_rerun, ...")
    value: Any = Field(description="the observed value (NaN/Inf as strings)")
    expected: str | None = Field(None, description="what a healthy run shows for this field")
    text: str = Field(description="rendered explanation of the rule firing")
    rule: str = Field(description="id of the rule that produced this evidence")
    source: str | None = Field(None, description="file the fact came from")


class NextStep(BaseModel):
    action: str
    command: str | None = None
    why: str = ""
    cost: Cost
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
    grade: Literal["prior", "symptom", "checklist", "localised", "confirmed"] = Field(
        "symptom", description="strongest kind of evidence behind it: prior only (nothing was measured: one "
                               "run alone, or two logs with no step in common), symptom only (the symptom differential), "
                               "checklist (a configuration / environment difference), localised (a dump, "
                               "rerun or monitor points at it), confirmed (a rerun that flips one switch)")


class SplitStep(BaseModel):
    id: str
    action: str
    command: str | None = None
    why: str = ""
    cost: Cost
    cost_label: str
    modes: list[str] = Field(description="failure modes this evidence can confirm or exclude")


class VerdictBasis(BaseModel):
    kind: Literal["symptoms", "accepted", "provisional", "evidence", "none"] = Field(
        description="symptoms: the curves / NaN counts / grad norms differ beyond tolerance; accepted: no gap, "
                    "by a measured noise band or the documented acceptance; provisional: no gap on what was "
                    "given, but short or without a band; evidence: no symptom, but a localised defect, or a "
                    "checklist finding the curves cannot clear (no noise band measured and no evaluation given, "
                    "or a difference that shows only downstream); none")
    text: str
    missing: list[str] = Field(default_factory=list, description="evidence that would firm up the verdict")


class Profile(BaseModel):
    symptoms: list[str]
    own: list[str] = Field(default_factory=list, description="symptoms seen in the target's own curve with "
                                                             "nothing to compare it with (one run alone)")
    runs: str | None = None
    onset: str | None = None
    step1_magnitude: str | None = None
    error_shape: str | None = None
    text: str


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
    verdict_basis: VerdictBasis | None = None
    profile: Profile | None = None
    split_step: SplitStep | None = Field(None, description="the cheapest missing evidence that best splits the "
                                                           "differential")
    facts: list[dict[str, Any]]
    warnings: list[dict[str, Any]]
    engine: str
    rule_pack: str
    lang: str


# ---------------------------------------------------------------- rule pack cache
_lock = threading.Lock()
_packs: dict[tuple[str, str], tuple[CompiledPack, Any]] = {}


def load_pack(rules_path: str | None = None, *, warnings: Warnings | None = None) -> CompiledPack:
    """The compiled rule pack (read from the on-disk cache when the rule files, the kb and
    precdx are as they were; engine/cache.py). Rules of another schema_version are skipped
    with a warning into `warnings`."""
    pack, skipped, _ = _cached_pack(rules_path)
    if warnings is not None:
        for item in skipped:
            warnings.add(**item)
    return pack


def _cached_pack(rules_path: str | None) -> tuple[CompiledPack, list[dict], str | None]:
    """(pack, its skipped-rule warnings, its cache key or None)."""
    from precdx import cache
    from precdx.kb import kb_dir, kb_files
    from precdx.rulepack.loader import rule_files

    files = rule_files(Path(rules_path) if rules_path else None)
    try:
        kb = kb_files(kb_dir())
    except PrecdxError:
        kb = []  # no knowledge base: the build below says so where it matters
    entry_key = cache.key("pack", [*files, *kb], str(rules_path or ""))

    def build() -> tuple[CompiledPack, list[dict]]:
        from precdx.modes import mode_catalog

        skipped = Warnings()
        loaded = load_rules(rules_path, warnings=skipped, tolerant=True)
        return compile_rules(loaded, known_modes=set(mode_catalog()) or None), skipped.items

    pack, skipped = cache.cached("pack", entry_key, build, modules=(
        "precdx.rulepack.compiler", "precdx.rulepack.schema", "precdx.vocabulary"))
    return pack, skipped, entry_key


_pack_warnings: dict[tuple[str, str], Warnings] = {}


def get_matcher(engine: str = "durable", rules_path: str | None = None):
    """The compiled pack and its matcher, cached per (engine, rule folder) in the process and
    on disk (the pack and the durable program; engine/cache.py). Rules of another
    schema_version are skipped with a warning (tolerant runtime; lint stays strict)."""
    key = (engine, str(rules_path or ""))
    with _lock:
        if key not in _packs:
            from precdx import cache

            pack, items, pack_key = _cached_pack(rules_path)
            skipped = Warnings()
            for item in items:
                skipped.add(**item)
            program = None
            if engine == "durable":
                from precdx.matching.durable_compile import compile_program

                program = cache.cached("durable", pack_key, lambda: compile_program(pack).without_paths(),
                                       modules=("precdx.matching.durable_compile",))
            _packs[key] = (pack, compile_matcher(pack, engine, program=program))
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


_MISSING = "\x00"
_PAREN_MISSING = re.compile(r"\s*[(（][^()（）]*\x00[^()（）]*[)）]")
_CLAUSE_SPLIT = re.compile(r"(?<=[,;，；:：])\s*")


def _drop_missing(text: str) -> str:
    """Remove the parts of a rendered text whose placeholder had no value: the enclosing
    parenthesis, else the enclosing clause, else the placeholder itself."""
    text = _PAREN_MISSING.sub("", text)
    if _MISSING not in text:
        return text
    sentences = re.split(r"(?<=[.。!?！？])\s+", text)
    kept = []
    for sent in sentences:
        if _MISSING not in sent:
            kept.append(sent)
            continue
        parts = _CLAUSE_SPLIT.split(sent)
        good = [p for p in parts if _MISSING not in p]
        if good and len(good) < len(parts):
            joined = " ".join(good).rstrip(",;，；:： ")
            end = sent.rstrip()[-1:] if sent.rstrip()[-1:] in ".。" else ""
            kept.append(joined + (end if joined and not joined.endswith(end) else ""))
        # a sentence that is nothing but the missing value is dropped whole
    out = " ".join(k for k in kept if k).strip()
    return out.replace(_MISSING, "").strip()


def render_template(text: str, bound: dict[str, Fact]) -> str:
    """Fill `{alias.field[:spec]}` placeholders; a field without a value drops its clause (never
    a '?' in user-facing text)."""
    def sub(m) -> str:
        fact = bound.get(m.group(1))
        if fact is None:
            return m.group(0)
        val = getattr(fact, m.group(2), None)
        return _MISSING if val is None else _fmt_value(val, m.group(3))
    out = PLACEHOLDER.sub(sub, text)
    return _drop_missing(out) if _MISSING in out else out


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


def _expected_healthy(test: Test) -> str | None:
    """For a rule whose conditions describe the healthy state (an aligned verdict), the test itself."""
    if test.ref is not None or test.op not in _NEGATE:
        return None
    sym = {"gt": ">", "ge": ">=", "lt": "<", "le": "<=", "eq": "==", "ne": "!="}[test.op]
    return f"{sym} {_fmt_value(test.value, None)}"


def _firing_evidence(rule: CompiledRule, firing: Firing, bound: dict[str, Fact], lang: str,
                     healthy: bool = False) -> list[Evidence]:
    text = render_template(rule.rule.explanation.get(lang), bound)
    alt = rule.alternatives[firing.alternative]
    items: list[Evidence] = []
    for p in alt.positives:
        fact = bound[p.alias]
        for t in p.tests:
            numeric = t.op in ("lt", "le", "gt", "ge", "nonfinite") or (
                t.op in ("eq", "ne") and isinstance(t.value, (int, float)))
            if not numeric:
                continue
            value = getattr(fact, t.field, None)
            if value is None and t.op != "nonfinite":
                continue
            if isinstance(t.value, bool) and t.op == "eq":
                expected = None if healthy else str(not t.value).lower()
            else:
                expected = _expected_healthy(t) if healthy else _expected(t)
            items.append(Evidence(fact=f"{p.fact_type}.{t.field}", role=getattr(fact, "role", None),
                                  value=_json_value(value), expected=expected, text=text, rule=rule.id,
                                  source=fact.source))
    if not items:
        p = alt.positives[0]
        fact = bound[p.alias]
        items.append(Evidence(fact=p.fact_type, role=getattr(fact, "role", None), value=None, text=text,
                              rule=rule.id, source=fact.source))
    # numbers first (they carry thresholds), then booleans
    items.sort(key=lambda e: (isinstance(e.value, bool), not isinstance(e.value, (int, float))))
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
_STAGE_GRADE = {"symptom": "symptom", "checklist": "checklist", "reproduce": "localised",
                "localise": "localised", "confirm": "confirmed"}
_GRADE_ORDER = ("prior", "symptom", "checklist", "localised", "confirmed")
DIFFERENTIAL_RULE = "DIFFERENTIAL"
PROCEDURE_RULE = "PROCEDURE-ORDER"
MECHANISM_RULE = "MECHANISM"
EXCLUDED_BY_EVIDENCE = 0.5   # a rule arguing against a symptom-only guess this strongly removes it
CHECKLIST_RULE = "CHECKLIST-CLEAN"
ACCEPT_STEPS = 1000          # the documented acceptance wants at least this many compared steps
PROVISIONAL_MIN_STEPS = 5    # below this nothing is compared enough to say "aligned"


SHADOWED = 0.5               # a category-wide checklist rule whose difference a knob-specific rule explains


def _shadowed_firings(firings: list[Firing], by_id: dict, fact_list: list[Fact]) -> set[int]:
    """Firings of checklist rules that blame a difference only by its category (any precision
    setting, any hyperparameter) while another rule names that very knob for a more specific
    failure mode (allow_tf32 -> the TF32 mode, grad_accum_dtype -> low-precision accumulation):
    the specific reading explains the difference better, so the category-wide one yields."""
    named: dict[int, set[str]] = {}     # diff fact index -> modes of rules that test its name
    generic: dict[int, tuple[set[int], set[str]]] = {}
    for n, firing in enumerate(firings):
        rule = by_id[firing.rule_id]
        if rule.rule.stage != "checklist" or not rule.rule.failure_modes or rule.rule.symptom:
            continue
        # the compiled alternative that fired names its patterns as the bindings do
        patterns = {p.alias: p for p in rule.alternatives[firing.alternative].positives}
        bound_named, bound_generic = set(), set()
        for alias, idx in firing.bindings:
            field = DIFF_TYPES.get(getattr(fact_list[idx], "type", None))
            pat = patterns.get(alias)
            if field is None or pat is None:
                continue
            (bound_named if any(t.field == field for t in pat.tests) else bound_generic).add(idx)
        for idx in bound_named:
            named.setdefault(idx, set()).update(rule.rule.failure_modes)
        if bound_generic and not bound_named:
            generic[n] = (bound_generic, set(rule.rule.failure_modes))
    out = set()
    for n, (idxs, modes) in generic.items():
        if all(named.get(i, set()) - modes for i in idxs):
            out.add(n)
    return out


MECHANISM_FIT_FLOOR = 0.35   # a mechanism whose presentation fits the symptoms worst keeps this share


def _mechanism_fit(modes: list[str], profile: Any, kb: dict) -> dict[str, float]:
    """How well each mechanism's kb presentation explains the symptoms, relative to the best of
    them (1.0 for the best; modes without a presentation count as fitting)."""
    from precdx import differential as dx

    raw = {}
    for mode in modes:
        pres = getattr(kb.get(mode), "presentation", None)
        if pres is not None:
            raw[mode] = dx.score_mode(pres, profile)
    top = max(raw.values(), default=0.0)
    if top <= 0:
        return {}
    return {m: v / top for m, v in raw.items()}


def _not_a_difference(fact: Fact, warnings: Warnings) -> bool:
    """A config/env/library difference whose two sides hold the same value contradicts itself
    (hand-written facts, a bot's payload): it is named in the warnings and left out."""
    if getattr(fact, "type", None) not in DIFF_TYPES or getattr(fact, "presence", "both") != "both":
        return False
    b, t = getattr(fact, "baseline", None), getattr(fact, "target", None)
    # (letter case only: True / true; white space is kept, a template's trailing space is a real
    # difference: it changes the tokens)
    if b is None or t is None or str(b).lower() != str(t).lower():
        return False
    field = DIFF_TYPES[fact.type]
    warnings.add(f"{fact.type} '{getattr(fact, field, '')}' has the same value on both sides ({t}): "
                 f"not a difference, left out", path=getattr(fact, "source", None), source="diagnosis")
    return True


def _kb():
    from precdx.kb import load_kb
    try:
        return load_kb()
    except Exception:  # a broken kb is reported by its own loader; the diagnosis still runs
        return {}


def diagnose(facts: FactSet, *, engine: str = "durable", lang: str = "en", rules_path: str | None = None,
             warnings: Warnings | None = None, with_near_misses: bool = True) -> Diagnosis:
    from precdx import differential as dx
    from precdx import experiments as xp
    from precdx.modes import mode_catalog

    warnings = warnings if warnings is not None else Warnings()
    pack, matcher = get_matcher(engine, rules_path)
    warnings.extend(pack_warnings(engine, rules_path))
    fact_list = [f for f in facts if not _not_a_difference(f, warnings)]
    firings = matcher.run(fact_list)
    by_id = pack.by_id()
    catalog = mode_catalog()
    kb = _kb()
    device = run_device(fact_list)  # next steps are gated by the target's device

    contributions = []
    per_rule_evidence: dict[str, list[Evidence]] = {}
    per_rule_keys: dict[str, set] = {}
    per_rule_bound: dict[str, list[dict[str, Fact]]] = {}
    symptom_evidence: dict[str, list[Evidence]] = {}
    weights: dict[str, float] = {}
    declared = xp.declared_keys(fact_list)
    consequences = xp.consequence_types(declared)
    set_aside: dict[str, list[str]] = {}   # declared key -> checklist rules that would have blamed it
    shadowed = _shadowed_firings(firings, by_id, fact_list)
    for n_firing, firing in enumerate(firings):
        rule = by_id[firing.rule_id]
        bound = {alias: fact_list[i] for alias, i in firing.bindings}
        if declared and rule.rule.failure_modes and rule.rule.stage == "checklist":
            follows = next((consequences[f.type] for f in bound.values() if f.type in consequences), None)
            if follows is not None:  # a difference the declared change itself produces
                set_aside.setdefault(follows, []).append(rule.id)
                continue
            hit = next((f for f in bound.values() if xp.is_declared(f, declared)), None)
            if hit is not None:
                mechs = {m.mode for m in xp.mechanisms_for(
                    xp.diff_key(hit), library=getattr(hit, "type", None) == "library_diff")}
                # the user's own experiment is a trigger, not a cause -- unless the rule names one of
                # the mechanisms behind that very knob (a packing rule for a packing change)
                if not set(rule.rule.failure_modes) & mechs:
                    set_aside.setdefault(xp.diff_key(hit), []).append(rule.id)
                    continue
        healthy = bool(rule.rule.failure_modes) and all(
            (catalog.get(m).verdict if catalog.get(m) else "misaligned") == "aligned" for m in rule.rule.failure_modes)
        ev = _firing_evidence(rule, firing, bound, lang, healthy=healthy)
        if rule.rule.symptom:
            symptom_evidence.setdefault(rule.rule.symptom, []).extend(ev)
            continue
        w = _weight(rule, bound)
        if n_firing in shadowed:
            w = round(w * SHADOWED, 4)
        # evidence rows de-duplicated by content (hashable keys: linear, not pairwise __eq__)
        keys = per_rule_keys.setdefault(rule.id, set())
        fresh = [e for e in ev if (e.fact, e.role, repr(e.value), e.text) not in keys]
        keys.update((e.fact, e.role, repr(e.value), e.text) for e in fresh)
        if w >= weights.get(rule.id, -1):
            weights[rule.id] = w
            per_rule_evidence[rule.id] = fresh + per_rule_evidence.get(rule.id, [])
        else:
            per_rule_evidence[rule.id].extend(fresh)
        per_rule_bound.setdefault(rule.id, []).append(bound)
        for mode in rule.rule.failure_modes:
            contributions.append((mode, rule.id, w, True))
        for mode in rule.rule.against:
            contributions.append((mode, rule.id, w, False))

    # the symptom differential: every established symptom yields a ranked list of modes
    profile = dx.build_profile(fact_list, symptom_evidence.keys())
    for scope, reading in profile.scopes.items():
        if reading.answered is not None:
            warnings.add(f"'{dx.SCOPE_QUESTIONS[scope]}' was answered {'yes' if reading.answered else 'no'}, but "
                         f"{reading.basis} says otherwise; what the artefacts say is used", source="diagnosis")
    diff_entries = dx.differential(profile, kb)
    # nothing measured: one run alone, or two logs with no step in common. The modes by prior, and
    # the missing reference (the baseline's log, an overlapping rerun) as the step that splits them.
    prior_why = None
    if not diff_entries and not profile.symptoms and not profile.tentative and not profile.own:
        prior_why = "alone" if dx.one_run_alone(fact_list) else "disjoint" if dx.no_common_steps(fact_list) else None
    if prior_why:
        diff_entries = dx.prior_differential(profile, kb)
    diff_weight = {e.mode: e.weight for e in diff_entries}
    for e in diff_entries:
        contributions.append((e.mode, DIFFERENTIAL_RULE, e.weight, True))
    symptomatic = bool(profile.symptoms & set(dx.MISALIGNING))
    trigger_list = xp.triggers(fact_list, declared, symptomatic=symptomatic)
    mech_evidence: dict[str, list[Evidence]] = {}
    for trig in trigger_list:
        if not symptomatic and not trig.declared:
            continue
        w = (xp.DECLARED_WEIGHT if trig.declared else xp.UNDECLARED_WEIGHT) * (1.0 if symptomatic else 0.5)
        mechs = xp.mechanisms_for(trig.key, library=trig.library)
        fit = _mechanism_fit([m.mode for m in mechs], profile, kb) if symptomatic else {}
        for k, mech in enumerate(mechs):
            # the table lists mechanisms most likely first; with a symptom, a mechanism that does
            # not present that way (a grad-norm logging difference for a loss gap) falls back
            mw = w * (1.0 - 0.06 * k) * (MECHANISM_FIT_FLOOR + (1.0 - MECHANISM_FIT_FLOOR) * fit.get(mech.mode, 1.0))
            contributions.append((mech.mode, MECHANISM_RULE, round(mw, 4), True))
            why = mech.why_zh if lang == "zh" else mech.why_en
            text = (f"触发条件 {trig.describe(lang)}；依赖它的机制：{why}。" if lang == "zh"
                    else f"Trigger: {trig.describe(lang)}. Mechanism that depends on it: {why}.")
            mech_evidence.setdefault(mech.mode, []).append(Evidence(
                fact=f"{getattr(trig.fact, 'type', 'declared_change')}.{trig.key}", role="target",
                value=_json_value(getattr(trig.fact, "target", None)) if trig.fact is not None else trig.key,
                expected=(f"baseline {getattr(trig.fact, 'baseline', '')}" if trig.fact is not None else None),
                text=text, rule=MECHANISM_RULE, source=getattr(trig.fact, "source", None)))
    for key, rules_set_aside in set_aside.items():
        warnings.add(f"'{key}' is your declared change: {', '.join(sorted(set(rules_set_aside)))} would have named it "
                     f"as the cause; the mechanisms that depend on it are ranked instead", source="diagnosis")
    in_play = {c[0] for c in contributions if c[3]}
    for mode, w in dx.procedure_against(profile, kb, in_play).items():
        contributions.append((mode, PROCEDURE_RULE, w, False))
    # a mode implicated by a changed knob is not cleared by the checklist: its mechanism does not
    # show in the configuration (that is why the knob, not a setting, is the evidence)
    rule_supported = {c[0] for c in contributions if c[3] and c[1] != DIFFERENTIAL_RULE}
    for mode, w in dx.checklist_against(fact_list, pack, rule_supported, in_play).items():
        contributions.append((mode, CHECKLIST_RULE, w, False))

    profile_text = profile.describe(lang)
    hypotheses: list[Hypothesis] = []
    for ms in rank(contributions):
        differential_only = set(ms.support) <= {DIFFERENTIAL_RULE, MECHANISM_RULE}
        floor = dx.MIN_WEIGHT * (dx.PRIOR_CAP / dx.DIFFERENTIAL_CAP if prior_why else
                                 dx.TENTATIVE_CAP / dx.DIFFERENTIAL_CAP if (profile.tentative or profile.own)
                                 and not symptomatic else 1.0)
        if ms.score < REPORT_THRESHOLD and not (differential_only and ms.score >= floor):
            continue
        # a guess from the symptoms that a specific rule's evidence excludes is not listed
        if set(ms.support) == {DIFFERENTIAL_RULE} and any(
                w >= EXCLUDED_BY_EVIDENCE for r, w in ms.against.items() if r in by_id):
            continue
        info = catalog.get(ms.mode)
        rule_refs = [RuleRef(id=r, name=_rule_name(by_id, r), weight=round(w, 4), supports=True)
                     for r, w in sorted(ms.support.items(), key=lambda kv: (-kv[1], kv[0]))]
        rule_refs += [RuleRef(id=r, name=_rule_name(by_id, r), weight=round(w, 4), supports=False)
                      for r, w in sorted(ms.against.items(), key=lambda kv: (-kv[1], kv[0]))]
        evidence: list[Evidence] = []
        steps: list[NextStep] = []
        seen_steps: set[str] = set()
        refs: list[str] = []
        grade = "prior" if prior_why else "symptom"
        for rr in rule_refs:
            if not rr.supports:
                continue
            if rr.id == DIFFERENTIAL_RULE:
                evidence.append(_differential_evidence(ms.mode, profile_text, diff_weight[ms.mode], kb, lang, profile,
                                                       prior_why))
                continue
            if rr.id == MECHANISM_RULE:
                evidence.extend(mech_evidence.get(ms.mode, []))
                if grade in ("prior", "symptom"):
                    grade = "checklist"
                continue
            rule = by_id[rr.id]
            g = _STAGE_GRADE.get(rule.rule.stage, "localised")
            if _GRADE_ORDER.index(g) > _GRADE_ORDER.index(grade):
                grade = g
            evidence.extend(per_rule_evidence.get(rr.id, []))
            bound = per_rule_bound[rr.id][0]
            for st in rule.rule.next_steps:
                if not applies(st.device, device):
                    continue
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
        if not steps and MECHANISM_RULE in ms.support and any(e.fact.startswith("library_diff") for e in evidence):
            steps.append(NextStep(
                action=("阅读该库在两个版本之间的变更记录 / release notes，查找与现象相关的改动" if lang == "zh" else
                        "Read the library's changelog / release notes between the two versions for changes that match the symptom"),
                command=None, why="", cost="read",
                cost_label=(COST_LABELS_ZH if lang == "zh" else COST_LABELS)["read"], rule=MECHANISM_RULE))
        if set(ms.support) <= {DIFFERENTIAL_RULE, MECHANISM_RULE}:
            steps.extend(st for st in _kb_steps(ms.mode, kb, lang, device) if (st.command or st.action) not in seen_steps)
        first_rule = next((by_id[r.id].rule for r in rule_refs if r.id in by_id), None)
        title = info.title(lang) if info else (first_rule.title.get(lang) if first_rule else ms.mode)
        hypotheses.append(Hypothesis(
            failure_mode=ms.mode, score=ms.score, title=title,
            verdict=info.verdict if info else "misaligned",
            rules=rule_refs, evidence=evidence, next_steps=steps, references=refs, grade=grade))

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

    verdict, basis = derive_verdict(hypotheses, profile, fact_list, lang=lang, kb=kb)
    if verdict != "aligned":
        hypotheses = [h for h in hypotheses if not (h.verdict == "aligned" and profile.symptoms & set(dx.MISALIGNING))] \
            if profile.symptoms & set(dx.MISALIGNING) else hypotheses
    found = None  # the checklist finding a misaligned verdict rests on while the curves agree
    if verdict == "aligned":
        hypotheses = _with_aligned_hypothesis(hypotheses, basis, catalog, lang, kb, fact_list)
    elif basis.kind == "evidence" and (lc := _loss(fact_list)) is not None \
            and (getattr(lc, "steps_compared", 0) or 0) >= PROVISIONAL_MIN_STEPS \
            and hypotheses and _checklist_finding(hypotheses[0]):
        # (the curves agree, on a checklist finding alone: that the difference is harmless stays the
        # alternative)
        found = hypotheses[0]
        n = getattr(lc, "steps_compared", 0) or 0
        hypotheses = _with_aligned_hypothesis(hypotheses, VerdictBasis(kind="provisional", text=(
            f"在给定的 {n} 个共同 step 上无超差；该差异可能无影响" if lang == "zh" else
            f"No gap over the {n} common steps given; the difference may be harmless"), missing=list(basis.missing)),
            catalog, lang, kb, fact_list, found_first=True)
    _notice_checklist_only(verdict, hypotheses, warnings, lang)
    _notice_identical_logs(fact_list, warnings)
    belief = {h.failure_mode: h.score for h in hypotheses if h.verdict == "misaligned"}
    split = dx.split_step(fact_list, pack, belief, lang=lang, reference_first=prior_why == "alone") \
        if verdict != "aligned" else None
    if found is not None:
        split = _align_step(found, fact_list, lang, n) or split
    prof_out = Profile(symptoms=sorted(profile.symptoms), own=sorted(profile.own), runs=profile.runs, onset=profile.onset,
                       step1_magnitude=profile.step1_magnitude, error_shape=profile.error_shape, text=profile_text)
    return Diagnosis(
        verdict=verdict, summary=_summary(verdict, hypotheses, symptoms, lang, basis, prior_why), symptoms=symptoms,
        hypotheses=hypotheses, near_misses=misses, verdict_basis=basis, profile=prof_out,
        split_step=SplitStep(**split) if split else None,
        facts=facts.to_json(), warnings=list(warnings.items),
        engine=matcher.name, rule_pack=pack.version, lang=lang)


GRADE_LABELS = {"en": {"prior": "prior only", "symptom": "symptoms only", "checklist": "checklist",
                       "localised": "localised", "confirmed": "confirmed"},
                "zh": {"prior": "仅先验", "symptom": "仅症状", "checklist": "检查清单", "localised": "已定位",
                       "confirmed": "已确认"}}


def grade_label(grade: str, lang: str = "en") -> str:
    return GRADE_LABELS.get(lang, GRADE_LABELS["en"]).get(grade, grade)


ALIGNED_MODE = "aligned.within_noise"
ALIGNED_SCORE = {"accepted": 0.75, "provisional": 0.5}


def _checklist_finding(h: Hypothesis) -> bool:
    """A misaligned hypothesis the checklist raised, strong enough to carry a verdict."""
    return h.verdict == "misaligned" and h.grade == "checklist" and h.score >= MISALIGNED_THRESHOLD


def _config_evidence(h: Hypothesis) -> bool:
    """A hypothesis a rule raised from a relevant configuration difference (config_diff)."""
    return any(str(e.fact).startswith("config_diff") and e.rule not in (DIFFERENTIAL_RULE, MECHANISM_RULE)
               for e in h.evidence)


def _config_key(e: Evidence) -> str | None:
    """The setting a config_diff evidence row is about ('lr'), when it names one."""
    if not str(e.fact).startswith("config_diff"):
        return None
    m = re.search(r"'([^']+)'", e.text or "")
    return m.group(1) if m else None


def _align_step(found: Hypothesis, facts: list[Fact], lang: str, n: int) -> dict | None:
    """The split step of a verdict resting on a checklist finding while the curves agree (`n`
    common steps): what splits "the difference matters" from "harmless" is a run with the
    difference aligned, not a dump of a step where nothing diverges. The finding's own rerun (or
    the evaluation its steps name) when it has one; else, as for DAT-002 or WIN-003 whose steps are
    reads, the target run again with the settings the finding names set as on the baseline, over
    the same steps (a target_rerun/ whose configuration differs from the target's in those)."""
    modes = [found.failure_mode, ALIGNED_MODE]
    own = next((st for st in found.next_steps if st.cost in ("rerun", "long_run")), None)
    if own is not None:
        return {"id": "align_difference", "action": own.action, "command": own.command, "why": own.why,
                "cost": own.cost, "cost_label": own.cost_label, "modes": modes}
    keys = list(dict.fromkeys(k for e in found.evidence if (k := _config_key(e))))
    diffs = {getattr(f, "name", None): f for f in facts if getattr(f, "type", None) == "config_diff"
             and getattr(f, "role", None) == "target" and getattr(f, "against_role", None) == "baseline"}
    named = [diffs[k] for k in keys if k in diffs][:3]
    if not named:
        return None
    zh = lang == "zh"
    unset = "不设置" if zh else "unset"  # (a setting only the target sets is aligned by leaving it out)
    settings = ", ".join(f"'{d.name}' {unset}" if getattr(d, "presence", "") == "target_only"
                         else f"'{d.name}' = {d.baseline}" for d in named)
    action = (f"从目标脚本的副本按标杆设置 {settings}，运行到新目录（target_rerun/），同样跑 {n} 个 step，保留原目标运行；"
              f"然后重新诊断" if zh else
              f"Run the target again with {settings} as on the baseline, from a copy of its script into a new folder "
              f"(target_rerun/), for the same {n} steps, keeping the original target run; then diagnose again")
    why = ("给定的 step 内两条曲线一致，dump 找不到分叉算子；对齐该差异后重跑：曲线变化说明差异有影响，不变则在这些 step 内无害"
           "（更长的训练或下游评测判定其余）" if zh else
           "the curves agree over the steps given, so a dump would find no diverging operator; with the difference "
           "aligned, a curve that moves says it matters, one that does not says it is harmless over these steps (a "
           "longer run or a downstream evaluation settles the rest)")
    return {"id": "align_difference", "action": action, "command": None, "why": why, "cost": "rerun",
            "cost_label": (COST_LABELS_ZH if zh else COST_LABELS)["rerun"], "modes": modes}


def _downstream_only(h: Hypothesis, kb: dict, facts: list[Fact]) -> bool:
    """A difference found by the checklist whose mode typically shows only downstream, while no
    downstream evaluation was given: the curves cannot clear it (guide 3.1.1)."""
    if h.verdict != "misaligned" or h.grade not in ("checklist", "localised", "confirmed"):
        return False
    if any(getattr(f, "type", None) == "eval_gap" for f in facts):
        return False
    pres = getattr(kb.get(h.failure_mode), "presentation", None)
    return pres is not None and pres.symptoms.get("downstream_gap") == "typical"


def _with_aligned_hypothesis(hyps: list[Hypothesis], basis: VerdictBasis, catalog: dict,
                             lang: str, kb: dict | None = None, facts: list[Fact] | None = None,
                             found_first: bool = False) -> list[Hypothesis]:
    """An aligned verdict names its hypothesis first (the gap is noise, on the stated basis, with
    the missing evidence as its next steps) -- after any difference that typically shows only in
    a downstream evaluation nobody supplied. `found_first`: the verdict rests on what the
    checklist found (the curves agree): those findings go first, 'aligned' is their alternative."""
    ahead = [h for h in hyps if _downstream_only(h, kb or {}, facts or []) or (found_first and _checklist_finding(h))]
    rest = [h for h in hyps if h not in ahead]
    existing = next((h for h in rest if h.failure_mode == ALIGNED_MODE), None)
    if existing is not None:
        return ahead + [existing] + [h for h in rest if h is not existing]
    hyps = rest
    info = catalog.get(ALIGNED_MODE)
    cost_labels = COST_LABELS_ZH if lang == "zh" else COST_LABELS
    steps = [NextStep(action=(f"补充：{m}" if lang == "zh" else f"Add {m}"), command=None, why="",
                      cost="long_run" if ("1000" in m or "downstream" in m or "下游" in m) else "rerun",
                      cost_label=cost_labels["long_run" if ("1000" in m or "downstream" in m or "下游" in m) else "rerun"],
                      rule="VERDICT")
             for m in basis.missing]
    hyp = Hypothesis(
        failure_mode=ALIGNED_MODE, score=ALIGNED_SCORE.get(basis.kind, 0.5),
        title=info.title(lang) if info else ALIGNED_MODE, verdict="aligned",
        rules=[RuleRef(id="VERDICT", name="verdict-from-symptoms", weight=ALIGNED_SCORE.get(basis.kind, 0.5),
                       supports=True)],
        evidence=[Evidence(fact="verdict_basis", value=basis.kind, expected=None, text=basis.text, rule="VERDICT")],
        next_steps=steps, references=list(info.references) if info else [],
        grade="symptom" if basis.kind == "provisional" else "checklist")
    return ahead + [hyp] + hyps


def _rule_name(by_id: dict, rid: str) -> str:
    if rid == DIFFERENTIAL_RULE:
        return "symptom-differential"
    if rid == PROCEDURE_RULE:
        return "procedure-order-nan-first"
    if rid == MECHANISM_RULE:
        return "mechanism-behind-a-changed-knob"
    if rid == CHECKLIST_RULE:
        return "checklist-read-no-difference"
    return by_id[rid].rule.name


def _differential_evidence(mode: str, profile_text: str, weight: float, kb: dict, lang: str,
                           profile: Any = None, prior_why: str | None = None) -> Evidence:
    from precdx import differential as dx

    entry = kb.get(mode)
    pres = getattr(entry, "presentation", None)
    freq = getattr(pres, "frequency", None)
    scope = dx.describe_scope(getattr(pres, "scope", None), profile, lang) if profile is not None else ""
    shown = (freq or "unknown").replace("_", " ")
    if prior_why:  # (head, tail) in zh and en; the scope sentence goes between
        fact = "prior"
        why_zh, why_en = (("两份日志没有共同 step", "The two logs share no step") if prior_why == "disjoint"
                          else ("没有参照运行", "Nothing to compare with"))
        zh = (f"{why_zh}，无法度量任何差异：仅按该失效模式在迁移案例中的常见度排序（{freq or '未知'}，专家估计）。",
              "本案尚无任何证据指向它。")
        en = (f"{why_en}, so no gap could be measured: ranked only by how common this mode is in "
              f"migrations (frequency '{shown}', an expert estimate).", "Nothing in this case points to it yet.")
    else:
        fact = "symptom_profile"
        zh = (f"症状画像：{profile_text}。这与该失效模式的典型表现相符（知识库 presentation；常见度 {freq or '未知'} 为专家估计）。",
              "仅凭症状，尚未被具体证据确认。")
        en = (f"Symptom profile: {profile_text}. This fits how this failure mode typically presents (kb presentation; "
              f"frequency '{shown}' is an expert estimate).", "Symptoms only: no specific evidence confirms it yet.")
    text = f"{zh[0]}{scope}{zh[1]}" if lang == "zh" else " ".join(x for x in (en[0], scope, en[1]) if x)
    return Evidence(fact=fact, value=round(weight, 4), expected=None, text=text, rule=DIFFERENTIAL_RULE, source=None)


def _kb_steps(mode: str, kb: dict, lang: str, device: str | None = None) -> list[NextStep]:
    """A hypothesis that only the differential raised takes its next steps from its kb entry
    (the commands meant for the target's device)."""
    entry = kb.get(mode)
    out: list[NextStep] = []
    commands = [c for c in (getattr(entry, "commands", None) or []) if applies(getattr(c, "device", None), device)]
    for cmd in commands[:3]:
        why = cmd.why.get(lang)
        cost = getattr(cmd, "cost", None) or ("rerun" if _looks_costly(cmd.command) else "read")
        out.append(NextStep(action=why[:1].upper() + why[1:] if lang != "zh" else why, command=cmd.command,
                            why="", cost=cost, cost_label=(COST_LABELS_ZH if lang == "zh" else COST_LABELS)[cost],
                            rule=f"kb:{mode}"))
    return out


def _looks_costly(command: str) -> bool:
    """A kb command that launches training (a script, torchrun, deepspeed, an exported switch);
    a one-line `python -c` print is a read."""
    launches = re.sub(r"python3? -c ", "", command)
    return any(w in launches for w in ("bash ", "torchrun", "python ", "deepspeed ", "msprobe -f", "export "))


def _notice_checklist_only(verdict: str, hyps: list[Hypothesis], warnings: Warnings, lang: str) -> None:
    """Configuration or version differences with matching curves are warnings, not a verdict."""
    if verdict != "aligned":
        return
    for h in hyps:
        if h.verdict == "misaligned" and h.grade == "checklist":
            keys = "; ".join(e.text for e in h.evidence[:2])
            warnings.add(f"{h.failure_mode}: {keys} — the compared curves agree, so this difference had no "
                          f"visible effect on what was given", source="diagnosis")


def _same_file(a: str, b: str) -> bool:
    import hashlib
    import os

    try:
        if os.path.samefile(a, b):
            return True
        if os.path.getsize(a) != os.path.getsize(b):
            return False
        digests = []
        for path in (a, b):
            h = hashlib.sha1()
            with open(path, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
            digests.append(h.digest())
        return digests[0] == digests[1]
    except OSError:
        return False


def _notice_identical_logs(facts: list[Fact], warnings: Warnings) -> None:
    """The same log given as both sides (byte-identical files) is noticed, not compared."""
    series = {getattr(f, "role", None): f for f in facts if getattr(f, "type", None) == "loss_series"}
    t, b = series.get("target"), series.get("baseline")
    if t is None or b is None or not t.source or not b.source:
        return
    if _same_file(str(t.source), str(b.source)):
        warnings.add(f"the target and baseline logs are the same file content ({t.source} = {b.source}): "
                     f"the same log given twice? Nothing was really compared", source="diagnosis")


def _loss(facts: list[Fact], role: str = "target") -> Fact | None:
    return next((f for f in facts if getattr(f, "type", None) == "loss_compare" and getattr(f, "role", None) == role),
                None)


def derive_verdict(hypotheses: list[Hypothesis], profile=None, facts: list[Fact] | None = None, *,
                   lang: str = "en", kb: dict | None = None) -> tuple[str, VerdictBasis]:
    """The verdict comes from the symptoms; the cause is ranked separately.

    misaligned -- a misaligning symptom is established (curves, NaN counts, grad norms, reruns
                  differ beyond tolerance), with or without a named cause; or, with no symptom, a
                  localised defect scores high.
    aligned    -- the compared steps show no gap: 'accepted' with a measured noise band or the
                  documented acceptance (>= 1000 steps, grad norm within 10%, error around zero),
                  'provisional' otherwise (the missing evidence is listed).
                  Not while a difference the checklist found belongs to a mode that typically
                  shows only in a downstream evaluation and none was given (guide 3.1.1: FSDP
                  against DDP, matching curves, a worse model): the curves cannot clear it, so the
                  configuration difference is the finding (misaligned, on that evidence).
    inconclusive -- nothing was compared and nothing is localised.
    """
    from precdx.differential import MISALIGNING

    zh = lang == "zh"
    facts = facts or []
    established = sorted((profile.symptoms if profile is not None else set()) & set(MISALIGNING))
    top_mis = next((h for h in hypotheses if h.verdict == "misaligned"), None)
    if established:
        named = top_mis is not None and top_mis.grade not in ("prior", "symptom") and top_mis.score >= MISALIGNED_THRESHOLD
        text = ("曲线、NaN 计数、grad norm 或重跑超出容差：" if zh else
                "The curves, NaN counts, grad norms or reruns differ beyond tolerance: ") + ", ".join(established)
        if not named:
            text += ("；原因尚未确定" if zh else "; cause not yet determined")
        return "misaligned", VerdictBasis(kind="symptoms", text=text)
    lc = _loss(facts)
    compared = lc is not None and (getattr(lc, "steps_compared", 0) or 0) >= PROVISIONAL_MIN_STEPS
    if top_mis is not None and top_mis.score >= MISALIGNED_THRESHOLD and (
            top_mis.grade in ("localised", "confirmed") or not compared):
        return "misaligned", VerdictBasis(kind="evidence", text=(
            ("曲线无超差，但有定位到的缺陷证据：" if compared else "没有可比较的曲线，但有指向缺陷的证据：") if zh else
            ("No curve gap beyond tolerance, but a localised defect: " if compared else
             "No curves compared, but the evidence points at a defect: ")) + top_mis.failure_mode)
    tooling = next((h for h in hypotheses if h.verdict == "tooling" and h.score >= MISALIGNED_THRESHOLD), None)
    hidden = next((h for h in hypotheses if h.score >= MISALIGNED_THRESHOLD and _downstream_only(h, kb or {}, facts)),
                  None)
    if compared and tooling is None and hidden is not None:
        n = getattr(lc, "steps_compared", 0) or 0
        return "misaligned", VerdictBasis(kind="evidence", text=(
            f"{n} 个共同 step 的曲线无超差，但检查清单发现一处通常只在下游评测中显现的差异（未提供下游评测）：" if zh else
            f"No curve gap over {n} common steps, but the checklist found a difference that typically shows "
            f"only in a downstream evaluation, and none was given: ") + hidden.failure_mode, missing=[
            "两侧模型的下游评测（对齐该差异前后）" if zh else
            "a downstream evaluation of both models (before and after aligning that difference)"])
    few = lc is None or (getattr(lc, "steps_compared", 0) or 0) < PROVISIONAL_MIN_STEPS
    tentative = sorted((getattr(profile, "tentative", set()) or set()) & set(MISALIGNING)) if few else []
    if few and tooling is None and tentative:
        # beyond tolerance, though on too few points for a symptom rule: the runs differ all the same
        n = getattr(lc, "steps_compared", 0) if lc is not None else 0
        text = (f"仅 {n} 个比较 step，但已超出容差：" if zh else
                f"Beyond tolerance on only {n} compared step(s) (too few to establish a symptom): ") + ", ".join(tentative)
        text += "；原因尚未确定" if zh else "; cause not yet determined"
        return "misaligned", VerdictBasis(kind="symptoms", text=text, missing=[
            "更多共同 step（两侧完整日志）" if zh else "more common steps (both full logs)"])
    evals = [f for f in facts if getattr(f, "type", None) == "eval_gap" and getattr(f, "role", None) == "target"]
    if lc is None and tooling is None and evals:
        # only a downstream evaluation was compared, and it shows no consistent gap
        text = (f"给定的下游评测（{len(evals)} 个指标）无一致差异；暂定对齐" if zh else
                f"No consistent gap in the downstream evaluation given ({len(evals)} metric(s)); aligned provisionally")
        return "aligned", VerdictBasis(kind="provisional", text=text, missing=[
            "两侧训练日志（loss 与 grad norm 曲线）" if zh else "both training logs (loss and grad-norm curves)"])
    if lc is None or ((getattr(lc, "steps_compared", 0) or 0) < 1) or tooling is not None:
        if tooling is not None:
            return "inconclusive", VerdictBasis(kind="none", text=(
                "工具自身影响了结果" if zh else "The tooling itself affects the result: ") + tooling.failure_mode)
        if lc is None:
            text = ("没有可比较的训练曲线（两侧的训练日志不全）" if zh else
                    "No training curves were compared (the case lacks a training log on one side or both)")
        else:
            text = ("没有可比较的训练曲线（两份日志没有共同 step）" if zh else
                    "No training curves were compared (the two logs share no step)")
        return "inconclusive", VerdictBasis(kind="none", text=text, missing=[
            "两侧训练日志（baseline 与 target），且至少有几个共同 step" if zh else
            "two training logs (baseline and target) with at least a few common steps"])
    n = getattr(lc, "steps_compared", 0) or 0
    eval_given = any(getattr(f, "type", None) == "eval_gap" for f in facts)
    band = getattr(lc, "noise_band", None)
    within = getattr(lc, "within_noise_band", None)
    gn = next((f for f in facts if getattr(f, "type", None) == "grad_norm_compare"
               and getattr(f, "role", None) == "target"), None)
    gn_ok = gn is not None and getattr(gn, "mean_rel_err", None) is not None and gn.mean_rel_err <= 0.1
    mean = getattr(lc, "mean_rel_err", None) or 0.0
    signed = getattr(lc, "mean_signed_rel_err", None)
    around_zero = signed is not None and (mean <= 1e-4 or abs(signed) <= 0.5 * mean)
    missing: list[str] = []
    if band is not None and within:
        kind = "accepted"
        text = (f"{n} 个共同 step 无超差，误差在标杆重跑测得的波动带（{band:.2%}）内" if zh else
                f"No gap over {n} common steps; the error lies within the noise band measured by the baseline "
                f"rerun ({band:.2%})")
    elif n >= ACCEPT_STEPS and gn_ok and around_zero:
        kind = "accepted"
        text = (f"{n} 个共同 step 满足文档验收标准（grad norm 10% 以内，误差围绕 0 波动）" if zh else
                f"No gap over {n} common steps, meeting the documented acceptance (grad norm within 10%, "
                f"error oscillating around zero)")
    else:
        kind = "provisional"
        if band is None:
            missing.append("a baseline rerun (baseline_rerun/) to measure the run-to-run noise band" if not zh
                           else "标杆重跑（baseline_rerun/）以测量波动带")
        if n < ACCEPT_STEPS:
            missing.append(f"at least {ACCEPT_STEPS} compared steps (have {n})" if not zh
                           else f"至少 {ACCEPT_STEPS} 个比较 step（当前 {n}）")
        if gn is None:
            missing.append("grad norms in both logs" if not zh else "两侧日志中的 grad norm")
        elif not gn_ok:
            missing.append("grad norm within 10%" if not zh else "grad norm 误差在 10% 以内")
        if signed is None and mean > 1e-4:
            missing.append("the signed error per step (to see whether it oscillates around zero)" if not zh
                           else "逐 step 的带符号误差（判断是否围绕 0 波动）")
        elif not around_zero:
            missing.append("an error that oscillates around zero (it is one-sided)" if not zh
                           else "围绕 0 波动的误差（当前为单向偏差）")
        text = (f"在给定的 {n} 个共同 step 上无超差；暂定对齐" if zh else
                f"No gap over the {n} common steps given; aligned provisionally")
        if band is not None and not within:
            text += ("（误差超出测得的波动带）" if zh else " (the error exceeds the measured noise band)")
        # Unmeasured noise does not clear what the checklist found: the configuration check must
        # pass before curves are compared (hyperparameters, data, weights), and a curve with no
        # noise band cannot show that a relevant difference does not matter (a downstream
        # evaluation without a consistent gap, where given, does).
        found = next((h for h in hypotheses if _checklist_finding(h) and _config_evidence(h)), None)
        if found is not None and band is None and not eval_given:
            keys = ", ".join(dict.fromkeys(k for e in found.evidence if (k := _config_key(e))))
            what = f"{found.failure_mode}{('：' if zh else ': ') + keys if keys else ''}"
            return "misaligned", VerdictBasis(kind="evidence", text=(
                f"{n} 个共同 step 上无超差，但未测波动带，曲线不能排除检查清单发现的相关配置差异"
                f"（{what}）；对比精度前配置检查必须通过" if zh else
                f"No gap over the {n} common steps given, but with no noise band measured the curves cannot "
                f"clear the relevant configuration difference the checklist found ({what}); "
                f"the configuration check must pass before accuracy is compared"), missing=[
                "对齐该差异后的重跑（若为有意改动，用 --changed 声明）" if zh else
                "a rerun with that difference aligned (declare it with --changed if it is intended)",
                *missing])
    if not eval_given:
        missing.append("a downstream evaluation of both models (a gap can show only there)" if not zh
                       else "两侧模型的下游评测（差异可能只在下游体现）")
    return "aligned", VerdictBasis(kind=kind, text=text, missing=missing)


def _summary(verdict: str, hyps: list[Hypothesis], symptoms: list[Symptom], lang: str,
             basis: VerdictBasis | None = None, prior_why: str | None = None) -> str:
    """The one-line summary; `prior_why` ("alone" / "disjoint"): the ranking is by prior alone, and why."""
    zh = lang == "zh"
    sym = ", ".join(dict.fromkeys(s.title for s in symptoms))
    if verdict == "aligned":
        kind = basis.kind if basis else "provisional"
        if zh:
            return ("精度对齐（已验收）：" if kind == "accepted" else "精度暂定对齐：") + (basis.text if basis else "")
        return ("Aligned (accepted): " if kind == "accepted" else "Aligned (provisional): ") + (basis.text if basis else "")
    if not hyps:
        if verdict == "misaligned":
            return ("精度不对齐，原因尚未确定" if zh else "Misaligned — cause not yet determined") + (
                f"；症状：{sym}" if zh and sym else f"; symptoms: {sym}" if sym else "")
        if basis is not None and basis.kind == "none" and basis.text:
            # say what was missing rather than a generic request
            need = "；".join(basis.missing) if zh else "; ".join(basis.missing)
            return (f"无法定论：{basis.text}，尚无可指认的原因" + (f"；需要：{need}。" if need else "。") if zh else
                    f"Inconclusive: {basis.text}, and no cause is indicated yet" + (f"; needed: {need}." if need else "."))
        return ("证据不足，无法定位；请补充日志、配置或 dump。" if zh
                else "Inconclusive: not enough evidence to name a cause; add logs, configs or dumps.")
    top = hyps[0]
    undetermined = top.grade in ("prior", "symptom")
    if undetermined and verdict == "inconclusive" and prior_why and any(e.fact == "prior" for e in top.evidence):
        names = ", ".join(h.failure_mode for h in hyps[:3] if any(e.fact == "prior" for e in h.evidence))
        disjoint = prior_why == "disjoint"
        if zh:
            return ("无法定论：" + ("两份日志没有共同 step" if disjoint else "没有参照运行") +
                    f"，无法度量差异；按迁移案例中的常见度，先排查 {names}（仅为先验）。" +
                    ("请让两侧日志覆盖相同的 step 范围。" if disjoint else "请补充标杆侧日志。"))
        return ("Inconclusive: " + ("the two logs share no step" if disjoint else "nothing to compare this run with") +
                f", so no gap could be measured; by how common they are in migrations, check {names} first "
                "(priors only). " + ("Log an overlapping range of steps on both sides." if disjoint
                                     else "Add the baseline run's log."))
    if zh:
        head = "精度不对齐" if verdict == "misaligned" else "无法定论"
        lead = "原因尚未确定，症状最符合" if undetermined else "最可能的原因是"
        return f"{head}：{lead} {top.title}（{top.failure_mode}，得分 {top.score:.2f}）" + (f"；症状：{sym}" if sym else "")
    head = "Misaligned" if verdict == "misaligned" else "Inconclusive"
    if undetermined:
        return (f"{head} — cause not yet determined; the symptoms fit best {top.title} ({top.failure_mode}, "
                f"score {top.score:.2f}, symptoms only)") + (f"; symptoms: {sym}" if sym else "")
    return f"{head}: most likely {top.title} ({top.failure_mode}, score {top.score:.2f})" + (f"; symptoms: {sym}" if sym else "")
