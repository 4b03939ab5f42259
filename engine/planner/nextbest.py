"""Rank the evidence worth getting next by expected information gain per cost.

The model, kept simple on purpose:
- Belief. Over the failure modes in play (every mode a rule of the pack can support or argue
  against, plus any scored one, plus UNEXPLAINED: none of them), p(mode) is proportional to
  PRIOR + score(mode): a flat prior reshaped by the evidence. Its Shannon entropy (bits) measures how undecided the diagnosis is.
- Candidates and their outcomes.
  * question: an unanswered catalogue question that some rule tests. Each possible answer (yes
    and no; for number questions one value on each side of every threshold the rules use) is
    added as an observation fact and the facts are diagnosed again.
  * check: a fact that near-miss rules wait for (a missing fact type, or a field no fact of that
    type carries). Outcomes: each waiting rule fires (adding its estimated weight to its modes),
    or none does.
  * experiment: a next step of a top hypothesis, read as a test of that hypothesis that comes
    out right with probability TEST_ACCURACY. Its outcomes update the belief by Bayes' rule and
    are weighted by their predicted probability, so its gain is the mutual information between
    the outcome and the failure mode (never negative).
  Question and check outcomes are taken as equally likely: the rule pack has no likelihoods to
  do better, so a candidate whose outcomes on average spread the belief gets a negative gain
  and is left out.
- Value. gain = H(now) - mean H(after each outcome); value = gain / cost weight, cost weights
  doubling per class (read < rerun < dump < long_run < cluster).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Literal, Mapping

from pydantic import BaseModel, Field

from precdx.diagnosis import Diagnosis, Hypothesis, diagnose, get_matcher
from precdx.facts import REGISTRY, Fact, FactSet, match_dict
from precdx.facts.core import OBSERVATIONS
from precdx.planner.answers import question_applies, question_text
from precdx.planner.costs import COST_WEIGHT, fact_cost, observation_cost
from precdx.ranking import ModeScore, firing_weight, specificity
from precdx.rulepack.compiler import CompiledPack, CompiledRule
from precdx.rulepack.devices import run_device
from precdx.vocabulary import COST_LABELS, COST_LABELS_ZH, Cost

PRIOR = 0.05            # flat prior mass per mode in play
TEST_ACCURACY = 0.8     # P(an experiment confirms | its hypothesis holds) = P(refutes | it does not)
NEAR_MISS_STRENGTH = 0.75  # strength assumed for a near-miss rule that fires (value unknown yet)
MIN_GAIN = 0.005        # bits; below this a candidate is not worth asking
DOMINANT_SCORE = 0.6    # a hypothesis dominates at this score ...
DOMINANT_RATIO = 2.0    # ... when it is also this many times the runner-up
STEP_HYPOTHESES = 3     # next steps are taken from this many top hypotheses
UNEXPLAINED = "(unexplained)"  # the cause is none of the modes the pack knows

Kind = Literal["question", "check", "probe", "experiment"]


class Suggestion(BaseModel):
    """One piece of evidence worth getting, phrased as a question or a command to run."""

    kind: Kind = Field(description="question: answer yes/no/number; check: add a missing fact; "
                                   "probe: add a kind of evidence (configs and listings, a rerun, a dump); "
                                   "experiment: run a next step")
    id: str = Field(description="question name (observation catalogue), 'check:<fact>[.<field>]' "
                                "or 'step:<rule>:<n>'")
    text: str
    command: str | None = None
    why: str = ""
    answer: Literal["yes_no", "number", "none"] = Field(description="how the outcome is reported back")
    cost: Cost
    cost_label: str
    gain: float = Field(description="expected entropy reduction of the hypothesis belief (bits)")
    value: float = Field(description="gain per cost weight: the ranking key")
    modes: list[str] = Field(description="failure modes whose belief an outcome would move")
    rules: list[str] = Field(default_factory=list, description="rules this evidence feeds")


@dataclass
class _Candidate:
    kind: Kind
    id: str
    text: str
    cost: str
    outcomes: list[dict[str, float]]
    answer: str = "none"
    command: str | None = None
    why: str = ""
    rules: tuple[str, ...] = ()
    tests_mode: str | None = None  # experiments: the hypothesis the step tests
    tests_modes: tuple[str, ...] = ()  # evidence probes: the modes the new evidence confirms or excludes


# ---------------------------------------------------------------- belief
def belief(scores: Mapping[str, float], universe: Iterable[str]) -> dict[str, float]:
    """Normalised belief over the modes in play: PRIOR + score, scaled to sum to 1."""
    modes = set(universe) | set(scores)
    raw = {m: PRIOR + max(0.0, scores.get(m, 0.0)) for m in modes}
    total = sum(raw.values())
    return {m: v / total for m, v in raw.items()} if total else {}


def entropy(scores: Mapping[str, float], universe: Iterable[str]) -> float:
    """Entropy (bits) of the belief the scores give over the modes in play."""
    return _entropy_of(belief(scores, universe))


def dominant(diag: Diagnosis) -> Hypothesis | None:
    """The top hypothesis when it clearly dominates (strong, and well ahead of the runner-up)."""
    if not diag.hypotheses:
        return None
    top = diag.hypotheses[0]
    second = diag.hypotheses[1].score if len(diag.hypotheses) > 1 else 0.0
    if top.score >= DOMINANT_SCORE and top.score >= DOMINANT_RATIO * second:
        return top
    return None


def _scores(diag: Diagnosis) -> dict[str, float]:
    return {h.failure_mode: h.score for h in diag.hypotheses}


def _support_state(diag: Diagnosis) -> dict[str, ModeScore]:
    state: dict[str, ModeScore] = {}
    for h in diag.hypotheses:
        ms = state.setdefault(h.failure_mode, ModeScore(h.failure_mode))
        for r in h.rules:
            (ms.support if r.supports else ms.against)[r.id] = r.weight
    return state


def _with_rule(state: Mapping[str, ModeScore], base: Mapping[str, float], rule_id: str, weight: float,
               supports: Iterable[str], against: Iterable[str]) -> dict[str, float]:
    """Scores after one more (real or pseudo) rule firing, by the ranking's own noisy-OR."""
    out = dict(base)
    for mode, bucket in [(m, "support") for m in supports] + [(m, "against") for m in against]:
        prior = state.get(mode)
        ms = ModeScore(mode, dict(prior.support) if prior else {}, dict(prior.against) if prior else {})
        getattr(ms, bucket)[rule_id] = max(getattr(ms, bucket).get(rule_id, 0.0), weight)
        out[mode] = ms.score
    return out


# ---------------------------------------------------------------- what the pack can use
def _observation_patterns(rule: CompiledRule):
    for alt in rule.alternatives:
        for p in (*alt.positives, *alt.negatives):
            if p.fact_type == "observation":
                yield p


def _asked_names(pack: CompiledPack) -> dict[str, set[str]]:
    """Catalogue questions whose answer some rule tests -> the ids of those rules."""
    names: dict[str, set[str]] = {}
    for rule in pack.rules:
        for p in _observation_patterns(rule):
            tested: set[str] = set()
            for t in p.tests:
                if t.field == "name" and t.ref is None and t.op == "eq":
                    tested.add(t.value)
                elif t.field == "name" and t.ref is None and t.op == "in":
                    tested.update(t.value)
            for name in (tested or set(OBSERVATIONS)) & set(OBSERVATIONS):
                names.setdefault(name, set()).add(rule.id)
    # the questions that settle a scope of the differential (what kind of job it is)
    from precdx.differential import SCOPE_QUESTIONS

    for name in SCOPE_QUESTIONS.values():
        names.setdefault(name, set()).add("DIFFERENTIAL")
    return names


def _number_points(pack: CompiledPack, name: str) -> list[float]:
    """One representative answer per interval the rules' thresholds cut the number line into."""
    cuts: set[float] = set()
    for rule in pack.rules:
        for p in _observation_patterns(rule):
            names = {t.value for t in p.tests if t.field == "name" and t.op == "eq"} | {
                v for t in p.tests if t.field == "name" and t.op == "in" for v in t.value}
            if names and name not in names:
                continue
            for t in p.tests:
                if t.field == "number" and t.ref is None and isinstance(t.value, (int, float)):
                    cuts.add(float(t.value))
    if not cuts:
        return []
    ordered = sorted(cuts)
    step = max(1e-6, 0.01 * max(abs(c) for c in ordered))
    points = [ordered[0] - step] + [(a + b) / 2 for a, b in zip(ordered, ordered[1:])] + [ordered[-1] + step]
    points += ordered  # equality tests land on the cut itself
    return sorted(set(points))


def _doc_line(ftype: str) -> str:
    doc = REGISTRY[ftype].doc if ftype in REGISTRY else ""
    first = doc.split(". ")[0].split("\n\n")[0].replace("\n", " ").strip()
    return first.rstrip(".")


# ---------------------------------------------------------------- candidates
def _question_candidates(facts: list[Fact], pack: CompiledPack, answered: set[str], skipped: set[str],
                         simulate, lang: str, symptoms: set[str] = frozenset()) -> list[_Candidate]:
    out = []
    asked = _asked_names(pack)
    from precdx.differential import CURVE_SYMPTOMS, OBSERVED_SYMPTOMS, SYMPTOM_QUESTIONS, symptom_unknown

    if symptoms & CURVE_SYMPTOMS and "downstream_gap" not in symptoms:
        # the curves already differ: what the trained model does downstream (S5, "although training
        # loss is close") is another symptom class, not a question about this one
        asked = {n: r for n, r in asked.items() if OBSERVED_SYMPTOMS.get(n, ("",))[0] != "downstream_gap"}

    if symptom_unknown(facts):
        # Only what a person says: the procedure classifies the symptom first (NaN, first-step gap,
        # later drift, spikes, a worse downstream metric); the other questions wait until one of
        # them is answered yes, or all are answered or skipped.
        first = [n for n in (*SYMPTOM_QUESTIONS, "downstream_metric_gap") if n not in answered | skipped]
        if first:
            asked = {n: asked.get(n, set()) | {"DIFFERENTIAL"} for n in first}
    device = run_device(facts)
    for name in sorted(set(asked) - answered - skipped):
        if not question_applies(name, device):
            continue
        kind = OBSERVATIONS[name][0]
        if kind == "bool":
            answers: list[dict] = [{"value": True}, {"value": False}]
            answer = "yes_no"
        else:
            answers = [{"number": v} for v in _number_points(pack, name)]
            answer = "number"
        if not answers:
            continue
        outcomes = [simulate(facts + [_observation(name, a)]) for a in answers]
        out.append(_Candidate("question", name, question_text(name, lang, device), observation_cost(name), outcomes,
                              answer=answer, rules=tuple(sorted(asked[name]))))
    return out


def _observation(name: str, answer: dict) -> Fact:
    from precdx.facts import parse_fact
    return parse_fact({"type": "observation", "name": name, **answer, "source": "planner"})


def _check_candidates(facts: list[Fact], pack: CompiledPack, fired: set[str], diag: Diagnosis,
                      lang: str) -> list[_Candidate]:
    from precdx.matching.python_engine import near_misses

    present: dict[str, list[dict]] = {}
    for f in facts:
        present.setdefault(f.type, []).append(match_dict(f))
    by_id = pack.by_id()
    waiting: dict[tuple[str, str | None], list[CompiledRule]] = {}
    for nm in near_misses(pack, facts, fired):
        rule = by_id[nm.rule_id]
        if rule.rule.symptom or nm.fact_type == "observation" or nm.kind == "blocked_by":
            continue
        if nm.kind == "condition":
            # informative only when no fact of the type carries the field yet
            if any(nm.field in d or f"{nm.field}__nonfinite" in d for d in present.get(nm.fact_type, [])):
                continue
            key = (nm.fact_type, nm.field)
        else:
            key = (nm.fact_type, None)
        waiting.setdefault(key, []).append(rule)
    state, base = _support_state(diag), _scores(diag)
    zh = lang == "zh"
    out = []
    for (ftype, field), rules in sorted(waiting.items(), key=lambda kv: (kv[0][0], kv[0][1] or "")):
        outcomes = [base]
        for rule in rules:
            w = firing_weight(rule.rule.precision, NEAR_MISS_STRENGTH, specificity(rule.condition_count))
            outcomes.append(_with_rule(state, base, rule.id, w, rule.rule.failure_modes, rule.rule.against))
        titles = "; ".join(r.rule.title.get(lang) for r in rules[:3]) + (" ..." if len(rules) > 3 else "")
        spec = REGISTRY.get(ftype)
        if field:
            fdesc = spec.fields[field].description if spec and field in spec.fields else ""
            what = f"`{ftype}.{field}`" + (f" ({fdesc})" if fdesc else "")
            text = (f"测量 {what}；它决定 {len(rules)} 条规则：{titles}" if zh
                    else f"Measure {what}; it decides {len(rules)} rule(s): {titles}")
        else:
            doc = _doc_line(ftype)
            what = f"`{ftype}`" + (f" ({doc})" if doc else "")
            text = (f"补充证据 {what}；它决定 {len(rules)} 条规则：{titles}" if zh
                    else f"Provide {what}; it decides {len(rules)} rule(s): {titles}")
        cost = fact_cost(spec.collectors if spec else (), ftype)
        cid = f"check:{ftype}" + (f".{field}" if field else "")
        out.append(_Candidate("check", cid, text, cost, outcomes, rules=tuple(r.id for r in rules)))
    return out


def _experiment_candidates(diag: Diagnosis) -> list[_Candidate]:
    seen: set[str] = set()
    out = []
    for h in diag.hypotheses[:STEP_HYPOTHESES]:
        for n, step in enumerate(h.next_steps):
            key = step.command or step.action
            if key in seen:
                continue
            seen.add(key)
            out.append(_Candidate("experiment", f"step:{step.rule}:{n}", step.action, step.cost, [],
                                  command=step.command, why=step.why, rules=(step.rule,), tests_mode=h.failure_mode))
    return out


def _probe_candidates(facts: list[Fact], pack: CompiledPack, lang: str) -> list[_Candidate]:
    """Evidence the user can add (launch configs and listings, a target rerun, a dump), each
    read as a test of the modes whose rules read the facts it brings (the symptom differential's
    probes)."""
    from precdx import differential as dx

    idx = 1 if lang == "zh" else 0
    out = []
    for probe in dx._probes():
        if dx._present(facts, probe):
            continue
        decided = dx.probe_modes(pack, probe)
        if not decided:
            continue
        out.append(_Candidate("probe", f"probe:{probe.id}", probe.action[idx], probe.cost, [],
                              command=probe.command, why=probe.why[idx], tests_modes=tuple(sorted(decided))))
    return out


def _test_outcomes(prior: dict[str, float], mode: str | Iterable[str]) -> list[tuple[float, dict[str, float]]]:
    """(probability, posterior belief) for the two outcomes of a test of `mode` (or of a set of
    modes: the evidence points into the set, or away from it)."""
    tested = {mode} if isinstance(mode, str) else set(mode)
    out = []
    for confirms in (True, False):
        like = {m: (TEST_ACCURACY if (m in tested) == confirms else 1.0 - TEST_ACCURACY) for m in prior}
        p_outcome = sum(prior[m] * like[m] for m in prior)
        out.append((p_outcome, {m: prior[m] * like[m] / p_outcome for m in prior}))
    return out


def _entropy_of(dist: Mapping[str, float]) -> float:
    return -sum(p * math.log2(p) for p in dist.values() if p > 0)


# ---------------------------------------------------------------- plan
def plan(facts: FactSet | Iterable[Fact], *, engine: str = "python", lang: str = "en",
         rules_path: str | None = None, diag: Diagnosis | None = None, skipped: Iterable[str] = (),
         kinds: Iterable[str] = ("question", "check", "probe", "experiment"), limit: int | None = 10) -> list[Suggestion]:
    """The evidence worth getting next, best value (gain per cost) first. Candidates whose
    expected gain is below MIN_GAIN are left out; an empty list means nothing useful is left."""
    fact_list = list(facts)
    kinds = set(kinds)
    pack, matcher = get_matcher(engine, rules_path)
    if diag is None:
        diag = diagnose(FactSet(fact_list), engine=engine, lang=lang, rules_path=rules_path,
                        with_near_misses=False)

    def simulate(more: list[Fact]) -> dict[str, float]:
        return _scores(diagnose(FactSet(more), engine=engine, lang=lang, rules_path=rules_path,
                                with_near_misses=False))

    answered = {f.name for f in fact_list if f.type == "observation"}
    candidates: list[_Candidate] = []
    if "question" in kinds:
        candidates += _question_candidates(fact_list, pack, answered, set(skipped), simulate, lang,
                                           set(diag.profile.symptoms) if diag.profile is not None else set())
    if "check" in kinds:
        fired = {f.rule_id for f in matcher.run(fact_list)}
        candidates += _check_candidates(fact_list, pack, fired, diag, lang)
    if "probe" in kinds:
        candidates += _probe_candidates(fact_list, pack, lang)
    if "experiment" in kinds:
        candidates += _experiment_candidates(diag)

    base = _scores(diag)
    universe = {m for r in pack.rules for m in (*r.rule.failure_modes, *r.rule.against)} | set(base) | {UNEXPLAINED}
    for c in candidates:
        for o in c.outcomes:
            universe |= set(o)
    prior = belief(base, universe)
    h0 = _entropy_of(prior)
    out: list[Suggestion] = []
    for c in candidates:
        if c.tests_mode is not None:
            weighted = _test_outcomes(prior, c.tests_mode)
            moved = [c.tests_mode]
        elif c.tests_modes:
            weighted = _test_outcomes(prior, c.tests_modes)
            moved = [m for m in c.tests_modes if m in universe]
        else:
            weighted = [(1.0 / len(c.outcomes), belief(o, universe)) for o in c.outcomes]
            moved = sorted({m for o in c.outcomes for m in universe if abs(o.get(m, 0.0) - base.get(m, 0.0)) > 1e-9})
        gain = h0 - sum(p * _entropy_of(b) for p, b in weighted)
        if gain < MIN_GAIN:
            continue
        out.append(Suggestion(kind=c.kind, id=c.id, text=c.text, command=c.command, why=c.why, answer=c.answer,
                              cost=c.cost, cost_label=(COST_LABELS_ZH if lang == "zh" else COST_LABELS)[c.cost],
                              gain=round(gain, 4),
                              value=round(gain / COST_WEIGHT[c.cost], 4), modes=moved, rules=list(c.rules)))
    out.sort(key=lambda s: (-s.value, COST_WEIGHT[s.cost], s.kind, s.id))
    return out if limit is None else out[:limit]
