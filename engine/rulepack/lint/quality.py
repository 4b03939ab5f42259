"""Quality checks (Q0xx): test coverage of each rule (positive, negative, insufficient cases) and
the texts people read."""
from __future__ import annotations

import re
from collections import Counter

from precdx.rulepack.lint.base import LintContext, LintIssue, RuleEntry, Validator, issue_type
from precdx.rulepack.ruletest import case_counts


class QualityValidator(Validator):
    family = "quality"
    NO_STEPS = issue_type("Q001", "missing-next-steps", "error",
                          "A rule that supports a failure mode gives no next step a person can take.")
    NO_SOURCE = issue_type("Q002", "missing-reference", "error",
                           "A rule that supports a failure mode cites no reference (guide section, document, case).")
    NO_ZH = issue_type("Q003", "missing-translation", "error",
                       "A title, explanation or next-step action has no Chinese (zh) text.")
    SAME_ZH = issue_type("Q004", "untranslated", "warning",
                         "The zh text is a copy of the en text.")
    NO_POSITIVE = issue_type("Q005", "missing-positive-test", "error",
                             "The rule has no positive test case (facts on which it must fire).")
    NO_NEGATIVE = issue_type("Q006", "missing-negative-test", "error",
                             "The rule has no negative test case (similar facts on which it must stay silent).")
    NO_INSUFFICIENT = issue_type("Q007", "missing-insufficient-test", "info",
                                 "The rule has no insufficient-evidence test case.")
    NO_FP = issue_type("Q008", "missing-false-positives", "info",
                       "A rule that supports a failure mode documents no known false positives.")
    issue_types = (NO_STEPS, NO_SOURCE, NO_ZH, SAME_ZH, NO_POSITIVE, NO_NEGATIVE, NO_INSUFFICIENT, NO_FP)

    def __init__(self, ctx: LintContext) -> None:
        super().__init__(ctx)
        self.counts = case_counts(ctx.cases, [e.rule for e in ctx.rules])

    def validate(self, entry: RuleEntry) -> list[LintIssue]:
        rule = entry.rule
        out: list[LintIssue] = []
        supports = bool(rule.failure_modes)
        if supports and not rule.next_steps:
            out.append(self.issue(self.NO_STEPS, f"supports {', '.join(rule.failure_modes)} but has no next_steps",
                                  entry, "failure_modes"))
        if supports and not [r for r in rule.references if r.strip()]:
            out.append(self.issue(self.NO_SOURCE, "no references: cite the guide section or case it encodes",
                                  entry, "failure_modes"))
        if supports and not rule.false_positives:
            out.append(self.issue(self.NO_FP, "no false_positives documented", entry, "failure_modes"))
        texts = [("title", rule.title, ("title",)), ("explanation", rule.explanation, ("explanation",))]
        texts += [(f"next_steps[{i}].action", s.action, ("next_steps", i, "action"))
                  for i, s in enumerate(rule.next_steps)]
        for where, text, loc in texts:
            if not (text.zh or "").strip():
                out.append(self.issue(self.NO_ZH, f"{where} has no zh text", entry, *loc))
            elif text.zh.strip() == text.en.strip() and re.search(r"[A-Za-z]{3}", text.en):
                out.append(self.issue(self.SAME_ZH, f"{where}.zh repeats the English text", entry, *loc, "zh"))
        if rule.status != "deprecated":
            have = self.counts.get(rule.id, Counter())
            if not have["positive"]:
                out.append(self.issue(self.NO_POSITIVE, "no positive test case (kind: positive) in any *.test.yaml",
                                      entry, "id"))
            if not have["negative"]:
                out.append(self.issue(self.NO_NEGATIVE, "no negative test case (kind: negative) in any *.test.yaml",
                                      entry, "id"))
            if not have["insufficient"]:
                out.append(self.issue(self.NO_INSUFFICIENT, "no insufficient-evidence test case", entry, "id"))
        return out
