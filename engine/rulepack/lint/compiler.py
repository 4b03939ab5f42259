"""Compiler checks (K0xx): every rule compiles to the matcher IR within the limits of the engines."""
from __future__ import annotations

from precdx.errors import PrecdxError
from precdx.rulepack.lint.base import LintIssue, Validator, issue_type


class CompilerValidator(Validator):
    """Surfaces what the compiler (the runtime's own gate) rejects that no finer check named."""

    family = "reference"
    COMPILE = issue_type("R013", "compile-error", "error",
                         "The compiler rejects the rule (operator, value type, regex, join, engine limit); "
                         "the runtime would refuse the whole pack.")
    issue_types = (COMPILE,)

    def finalize(self) -> list[LintIssue]:
        # R014 (a placeholder that may print '?') never explains a compile failure
        flagged = {i.rule for i in self.ctx.issues if i.severity == "error" and i.code != "R014"}
        out = []
        for entry in self.ctx.rules:
            result = self.ctx.compiled.get(entry.id)
            if isinstance(result, PrecdxError) and entry.id not in flagged:
                msg = result.message.removeprefix(f"rule {entry.id}: ")
                out.append(self.issue(self.COMPILE, msg, entry, line=result.line))
        return out
