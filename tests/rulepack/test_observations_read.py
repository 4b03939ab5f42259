"""Every question the engine may ask (the observation catalogue) is read by at least one rule:
an answer nobody reads would be asked for nothing."""
from __future__ import annotations

from precdx.facts.core import OBSERVATIONS
from precdx.rulepack.loader import load_rules


def _observation_names(rule) -> set[str]:
    names: set[str] = set()
    for section in (rule.when.all, rule.when.any, rule.when.none):
        for pattern in section:
            if pattern.fact != "observation":
                continue
            test = pattern.where.get("name")
            if isinstance(test, str):
                names.add(test)
            elif isinstance(test, dict) and isinstance(test.get("in"), list):
                names.update(test["in"])
            elif isinstance(test, dict) and "eq" in test:
                names.add(test["eq"])
    return names


def test_every_observation_is_read_by_a_rule():
    """... or by the symptom differential: the questions that settle a scope (what kind of job it
    is: MoE, fp16, sequence parallelism, several cards) and those whose answer is a symptom (the
    symptom class a person reports: NaN, first-step gap, drift, spikes, a worse metric)."""
    from precdx.differential import OBSERVED_SYMPTOMS, SCOPE_QUESTIONS, SYMPTOM_QUESTIONS

    read: set[str] = set(SCOPE_QUESTIONS.values()) | set(OBSERVED_SYMPTOMS)
    assert set(SYMPTOM_QUESTIONS) <= set(OBSERVED_SYMPTOMS)
    assert read <= set(OBSERVATIONS)
    for entry in load_rules(None):
        rule = getattr(entry, "rule", entry)
        read |= _observation_names(rule)
    unread = sorted(set(OBSERVATIONS) - read)
    assert not unread, f"observations no rule reads: {unread}"
