"""Scoring: the one place where rule firings become a score in [0, 1] per failure mode.

weight(firing) = precision x strength x specificity
  precision   -- how often the rule is right when it fires (rule author's calibrated estimate)
  strength    -- how strongly the bound evidence exceeds the rule's threshold (0.5..1)
  specificity -- how many conditions the rule checks (more conditions, more specific)
score(mode) = noisy-OR of supporting weights (one per rule: repeated firings of one rule are
              not independent evidence) x (1 - noisy-OR of contradicting weights)
Ties break on the best single weight, then the number of supporting rules, then the id.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable


def specificity(condition_count: int) -> float:
    """0.65 for a single condition, rising towards 1 with more conditions."""
    n = max(1, condition_count)
    return 1.0 - 0.5 ** (1.0 + n / 2.0)


def strength(value: float | None, low: float, high: float, *, log: bool = False,
             absolute: bool = True) -> float:
    """Map an evidence value onto 0.5..1 between `low` and `high` (clipped); NaN/Inf or a
    missing value count as the strongest evidence only when non-finite (a NaN loss is as
    strong as it gets), and as neutral (0.75) when missing."""
    if value is None:
        return 0.75
    if isinstance(value, float) and not math.isfinite(value):
        return 1.0
    v = abs(value) if absolute else value
    if log:
        if v <= 0:
            return 0.5
        v, low, high = math.log10(v), math.log10(low), math.log10(high)
    t = (v - low) / (high - low)
    return 0.5 + 0.5 * min(1.0, max(0.0, t))


def firing_weight(precision: float, strength_value: float, specificity_value: float) -> float:
    return max(0.0, min(1.0, precision * strength_value * specificity_value))


def noisy_or(weights: Iterable[float]) -> float:
    p = 1.0
    for w in weights:
        p *= 1.0 - max(0.0, min(1.0, w))
    return 1.0 - p


@dataclass
class ModeScore:
    mode: str
    support: dict[str, float] = field(default_factory=dict)   # rule id -> best weight
    against: dict[str, float] = field(default_factory=dict)

    @property
    def score(self) -> float:
        return round(noisy_or(self.support.values()) * (1.0 - noisy_or(self.against.values())), 4)

    def sort_key(self) -> tuple:
        best = max(self.support.values(), default=0.0)
        return (-self.score, -best, -len(self.support), self.mode)


def rank(contributions: Iterable[tuple[str, str, float, bool]]) -> list[ModeScore]:
    """contributions: (mode, rule_id, weight, supports?) -> modes ranked best first.
    Modes with only contradicting evidence are kept (score 0) so callers can show why."""
    modes: dict[str, ModeScore] = {}
    for mode, rule_id, weight, supports in contributions:
        ms = modes.setdefault(mode, ModeScore(mode))
        bucket = ms.support if supports else ms.against
        bucket[rule_id] = max(bucket.get(rule_id, 0.0), weight)
    return sorted(modes.values(), key=ModeScore.sort_key)
