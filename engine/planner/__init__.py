"""Next best evidence: which question to ask or experiment to run next, ranked by expected
information gain per cost, and the consultation (`precdx ask`, chat sessions) built on it."""
from __future__ import annotations

from precdx.planner.answers import answer_to_fact, parse_answer  # noqa: F401
from precdx.planner.nextbest import Suggestion, dominant, plan  # noqa: F401
