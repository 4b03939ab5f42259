"""Matchers: run a compiled rule pack over facts and return firings (rule id + bound facts).

`compile_matcher(pack, engine="durable"|"python")` is the one entry point; both back ends
implement `Matcher.run(facts) -> list[Firing]` over the same IR and must agree exactly.
"""
from __future__ import annotations

from precdx.matching.base import Firing, Matcher  # noqa: F401
from precdx.vocabulary import ENGINES  # noqa: F401 (declared there)


def compile_matcher(pack, engine: str = "durable", *, program=None) -> Matcher:
    """`program`: the pack's durable-rules translation when already at hand (a cached
    `durable_compile.compile_program(pack)`)."""
    if engine == "python":
        from precdx.matching.python_engine import PythonMatcher
        return PythonMatcher(pack)
    if engine == "durable":
        from precdx.matching.durable_engine import DurableMatcher
        return DurableMatcher(pack, program=program)
    raise ValueError(f"unknown engine {engine!r} (choose from {', '.join(ENGINES)})")
