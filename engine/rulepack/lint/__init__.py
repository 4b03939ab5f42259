"""Lint the rule pack (`precdx rules lint`), pySigma style: one validator class per check family,
one module per family (schema, references, quality, logic, commands, compiler), registered by
class name; each issue type has a stable code, a symbolic name, a description and a severity.
Validators see each rule (`validate`) and then the whole pack (`finalize`, for cross-rule checks).

Lint is strict where the runtime is tolerant: it loads every rule file on its own so one broken
file does not hide the others, and it reads the fact vocabulary, the knowledge base and the rule
test cases, never a hand-kept list.

    base.py        issue model, what validators see, the validator base, pattern helpers
    schema.py ... compiler.py   the check families, in the order they run
    driver.py      load, build the context, run, render
"""
from __future__ import annotations

from precdx.rulepack.lint.base import (  # noqa: F401
    ISSUE_TYPES, SEVERITIES, VALIDATORS, IssueType, LintContext, LintIssue, LoadProblem, RuleEntry,
    Validator, bound_aliases, default_alias, is_collectable, issue_type, locate, pattern_lists,
    rule_fact_needs,
)
# the families register their validators on import, in this order
from precdx.rulepack.lint.schema import SchemaValidator  # noqa: F401
from precdx.rulepack.lint.references import ReferenceValidator  # noqa: F401
from precdx.rulepack.lint.quality import QualityValidator  # noqa: F401
from precdx.rulepack.lint.logic import LogicValidator, always_present, canonical_when  # noqa: F401
from precdx.rulepack.lint.commands import CommandValidator  # noqa: F401
from precdx.rulepack.lint.compiler import CompilerValidator  # noqa: F401
from precdx.rulepack.lint.driver import build_context, describe_issue_types, lint, render_lint  # noqa: F401
