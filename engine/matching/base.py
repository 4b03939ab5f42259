"""The matcher interface and what it returns."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

from precdx.facts import Fact


@dataclass(frozen=True, order=True)
class Firing:
    """One rule firing: which alternative matched and which fact (by index into the request's
    fact list) each alias bound."""

    rule_id: str
    alternative: int
    bindings: tuple[tuple[str, int], ...]

    def binding(self) -> dict[str, int]:
        return dict(self.bindings)


class Matcher(Protocol):
    name: str

    def run(self, facts: Sequence[Fact]) -> list[Firing]:
        """All firings for these facts, sorted; never depends on assert order."""

    def close(self) -> None:
        """Release engine resources (no-op for stateless matchers)."""
