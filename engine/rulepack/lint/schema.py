"""Schema checks (S0xx): strict YAML, the rule schema, schema versions, duplicate ids, test cases
that cannot run, rules written with former fact field names."""
from __future__ import annotations

from precdx.rulepack.lint.base import LintIssue, RuleEntry, Validator, issue_type


class SchemaValidator(Validator):
    family = "schema"
    YAML = issue_type("S001", "yaml-invalid", "error",
                      "The file is not strict YAML (syntax error, duplicate key, disallowed tag).")
    INVALID = issue_type("S002", "rule-invalid", "error",
                         "The rule does not fit the rule schema (unknown key, missing field, wrong type).")
    VERSION = issue_type("S003", "schema-version-unsupported", "error",
                         "The rule declares a schema_version this precdx does not read; the runtime skips it.")
    DUPLICATE = issue_type("S004", "duplicate-rule-id", "error",
                           "Two rules (or a rule and an alias) share an id; ids are never reused.")
    EMPTY = issue_type("S005", "empty-rule-file", "warning", "A rule file holds no rule.")
    CASE = issue_type("S006", "test-case-invalid", "error",
                      "A rule test case cannot run (malformed, invalid facts, duplicate case id).")
    FORMER_NAME = issue_type("S007", "former-field-name", "warning",
                             "A rule uses a fact field under its former name (accepted for one schema "
                             "version, rewritten on load); write the current name.")
    issue_types = (YAML, INVALID, VERSION, DUPLICATE, EMPTY, CASE, FORMER_NAME)

    def validate(self, entry: RuleEntry) -> list[LintIssue]:
        return [self.issue(self.FORMER_NAME, f"former field name {note.split(' -> ')[0]}: write "
                           f"{note.split(' -> ')[1]!r}", entry)
                for note in dict.fromkeys(entry.loaded.upgraded)]

    def finalize(self) -> list[LintIssue]:
        kinds = {"yaml": self.YAML, "rule": self.INVALID, "version": self.VERSION, "empty": self.EMPTY}
        out = [self.issue(kinds[p.kind], p.message, path=p.path, line=p.line, rule=p.rule)
               for p in self.ctx.problems]
        seen: dict[str, RuleEntry] = {}
        for entry in self.ctx.rules:
            for name in dict.fromkeys((entry.id, *entry.rule.aliases)):
                prior = seen.get(name)
                if prior is not None:
                    what = "id" if name == entry.id else "alias"
                    out.append(self.issue(self.DUPLICATE, f"{what} {name!r} is already taken by the rule at "
                                          f"{prior.path}:{prior.loaded.line} ({prior.id})", entry,
                                          *(("id",) if name == entry.id else ("aliases",))))
                else:
                    seen[name] = entry
        for case in self.ctx.cases:
            if case.error is not None:
                out.append(self.issue(self.CASE, f"{case.case_id}: {case.error}", path=case.path, line=case.line,
                                      rule=case.rule if case.rule != "?" else None))
        return out
