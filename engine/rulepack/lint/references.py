"""Reference checks (R0xx): failure modes, fact types and fields, placeholders, kb entries and
citations that rules name must exist."""
from __future__ import annotations

from precdx.facts import REGISTRY
from precdx.rulepack.compiler import PLACEHOLDER
from precdx.rulepack.lint.base import (
    LintIssue, RuleEntry, Validator, _conds, _is_ref, always_present, bound_aliases, default_alias,
    issue_type, pattern_lists,
)
from precdx.rulepack.schema import Rule


class ReferenceValidator(Validator):
    family = "reference"
    UNKNOWN_MODE = issue_type("R001", "unknown-failure-mode", "error",
                              "failure_modes/against names an id with no knowledge-base entry.")
    KB = issue_type("R002", "kb-unavailable", "error",
                    "The knowledge base does not load, so failure-mode ids cannot be checked.")
    UNKNOWN_FACT = issue_type("R003", "unknown-fact-type", "error",
                              "A pattern names a fact type the vocabulary does not declare.")
    UNKNOWN_FIELD = issue_type("R004", "unknown-field", "error",
                               "A condition tests a field the fact type does not have.")
    DESCRIPTIVE = issue_type("R005", "descriptive-field", "error",
                             "A condition tests a descriptive field (match=False) that the matcher never sees.")
    PLACEHOLDER = issue_type("R006", "unresolved-placeholder", "error",
                             "A template placeholder {alias.field} names an alias not bound in every "
                             "alternative, a field the bound fact lacks, or sits in text that is never rendered.")
    FORMAT = issue_type("R007", "placeholder-format-invalid", "warning",
                        "A placeholder's format spec does not apply to the field's kind; the value is "
                        "printed unformatted.")
    EMPTY_COMMAND = issue_type("R008", "empty-command", "error",
                               "A next step gives a command that is empty.")
    EMPTY_TEXT = issue_type("R009", "empty-text", "error",
                            "A title, explanation or next-step action is empty.")
    EMPTY_REF = issue_type("R010", "empty-reference", "error", "A reference is empty.")
    CASE_RULE = issue_type("R011", "test-unknown-rule", "error",
                           "A test case names a rule id (or alias) that no rule has; such a case fails.")
    CASE_MODE = issue_type("R012", "test-unknown-mode", "error",
                           "A test case's `top` names a failure mode with no knowledge-base entry.")
    UNGUARDED = issue_type("R014", "placeholder-may-render-unknown", "error",
                           "A placeholder {alias.field} names a field that a matching fact may lack (the rule "
                           "does not test it and it has no default), so the text could render '?'; test the "
                           "field (e.g. `exists: true`) or drop the placeholder.")
    UNGUARDED_DESC = issue_type("R015", "descriptive-placeholder-may-be-absent", "warning",
                                "A placeholder names a descriptive field (match=False) that a fact may lack, so "
                                "the text could render '?'.")
    issue_types = (UNKNOWN_MODE, KB, UNKNOWN_FACT, UNKNOWN_FIELD, DESCRIPTIVE, PLACEHOLDER, FORMAT,
                   EMPTY_COMMAND, EMPTY_TEXT, EMPTY_REF, CASE_RULE, CASE_MODE, UNGUARDED, UNGUARDED_DESC)

    _SAMPLE = {"number": 1.5, "integer": 3, "string": "x", "boolean": True}

    def validate(self, entry: RuleEntry) -> list[LintIssue]:
        rule = entry.rule
        out: list[LintIssue] = []
        kb = self.ctx.kb
        if kb is not None:
            for key in ("failure_modes", "against"):
                for i, mode in enumerate(getattr(rule, key)):
                    if mode not in kb:
                        out.append(self.issue(self.UNKNOWN_MODE, f"{key}: {mode!r} has no kb entry", entry, key, i))
        for sec, i, pat in pattern_lists(rule):
            spec = REGISTRY.get(pat.fact)
            if spec is None:
                out.append(self.issue(self.UNKNOWN_FACT, f"when.{sec}[{i}]: unknown fact type {pat.fact!r}",
                                      entry, "when", sec, i, "fact"))
                continue
            for fname in pat.where:
                fspec = spec.fields.get(fname)
                if fspec is None:
                    out.append(self.issue(self.UNKNOWN_FIELD, f"{pat.fact} has no field {fname!r}",
                                          entry, "when", sec, i, "where", fname))
                elif not fspec.match:
                    out.append(self.issue(self.DESCRIPTIVE, f"{pat.fact}.{fname} is descriptive (match=False)",
                                          entry, "when", sec, i, "where", fname))
        out += self._templates(entry)
        for t, loc in ((rule.title, ("title",)), (rule.explanation, ("explanation",))):
            if not t.en.strip():
                out.append(self.issue(self.EMPTY_TEXT, f"{loc[0]}.en is empty", entry, *loc))
        for i, step in enumerate(rule.next_steps):
            if not step.action.en.strip():
                out.append(self.issue(self.EMPTY_TEXT, f"next_steps[{i}].action.en is empty",
                                      entry, "next_steps", i, "action"))
            if step.command is not None and not step.command.strip():
                out.append(self.issue(self.EMPTY_COMMAND, f"next_steps[{i}].command is empty "
                                      "(drop the key, or give the command as a person would run it)",
                                      entry, "next_steps", i, "command"))
        for i, ref in enumerate(rule.references):
            if not ref.strip():
                out.append(self.issue(self.EMPTY_REF, f"references[{i}] is empty", entry, "references", i))
        return out

    def _templates(self, entry: RuleEntry) -> list[LintIssue]:
        rule = entry.rule
        bound = bound_aliases(rule)
        rendered: list[tuple[str, str, tuple]] = []
        for lang in ("en", "zh"):
            rendered.append((f"explanation.{lang}", getattr(rule.explanation, lang) or "", ("explanation", lang)))
        for i, step in enumerate(rule.next_steps):
            for lang in ("en", "zh"):
                rendered.append((f"next_steps[{i}].action.{lang}", getattr(step.action, lang) or "",
                                 ("next_steps", i, "action", lang)))
                if step.why is not None:
                    rendered.append((f"next_steps[{i}].why.{lang}", getattr(step.why, lang) or "",
                                     ("next_steps", i, "why", lang)))
            rendered.append((f"next_steps[{i}].command", step.command or "", ("next_steps", i, "command")))
        literal = [(f"title.{lang}", getattr(rule.title, lang) or "", ("title", lang)) for lang in ("en", "zh")]
        for i, fp in enumerate(rule.false_positives):
            literal += [(f"false_positives[{i}].{lang}", getattr(fp, lang) or "", ("false_positives", i, lang))
                        for lang in ("en", "zh")]
        out: list[LintIssue] = []
        for where, text, loc in literal:
            for m in PLACEHOLDER.finditer(text):
                out.append(self.issue(self.PLACEHOLDER, f"{where}: {m.group(0)} is never rendered here "
                                      "(only explanations and next steps are templates)", entry, *loc))
        for where, text, loc in rendered:
            for m in PLACEHOLDER.finditer(text):
                alias, fname, spec = m.group(1), m.group(2), m.group(3)
                types = bound.get(alias)
                if types is None:
                    have = ", ".join(sorted(bound)) or "none"
                    out.append(self.issue(self.PLACEHOLDER, f"{where}: {m.group(0)}: alias {alias!r} is not bound "
                                          f"in every alternative (bound: {have})", entry, *loc))
                    continue
                known = [REGISTRY[t].fields.get(fname) for t in types if t in REGISTRY]
                if len(known) != len(types) or any(f is None for f in known):
                    lacking = [t for t in types if t not in REGISTRY or fname not in REGISTRY[t].fields]
                    out.append(self.issue(self.PLACEHOLDER, f"{where}: {m.group(0)}: {', '.join(lacking)} has "
                                          f"no field {fname!r}", entry, *loc))
                    continue
                if not self._guaranteed(rule, alias, fname):
                    desc = all(not f.match for f in known)
                    out.append(self.issue(self.UNGUARDED_DESC if desc else self.UNGUARDED,
                                          f"{where}: {m.group(0)} may render '?': no condition of the rule "
                                          f"requires {alias}.{fname}", entry, *loc))
                if spec:
                    for fspec in known:
                        try:
                            format(self._SAMPLE[fspec.kind], spec)
                        except (ValueError, TypeError):
                            out.append(self.issue(self.FORMAT, f"{where}: {m.group(0)}: format {spec!r} does not "
                                                  f"apply to {fspec.kind} field {fname!r}", entry, *loc))
                            break
        return out

    @staticmethod
    def _guaranteed(rule: Rule, alias: str, fname: str) -> bool:
        """Every fact the alias can bind carries `fname`: each pattern binding the alias tests the
        field with a comparison (a missing field fails every comparison), or the field is always
        present on that fact type."""
        pats = [(sec, i, p) for sec, i, p in pattern_lists(rule) if sec != "none"
                and (p.alias or default_alias(rule, sec, i)) == alias]
        if not pats:
            return False
        joined = {v["ref"] for _s, _i, p in pattern_lists(rule) if _s != "none"
                  for ops in _conds(p.where).values() for v in ops.values()
                  if _is_ref(v) and isinstance(v.get("ref"), str)}
        for _sec, _i, p in pats:
            if always_present(p.fact, fname) or f"{alias}.{fname}" in joined:
                continue
            ops = _conds(p.where).get(fname)
            if not ops:
                return False
            if ops.get("exists") is False or (set(ops) <= {"nonfinite"} and ops.get("nonfinite") is False):
                return False
        return True

    def finalize(self) -> list[LintIssue]:
        out = []
        err = self.ctx.kb_error
        if err is not None:
            out.append(self.issue(self.KB, f"knowledge base does not load: {err.message}"
                                  + (f" ({err.hint})" if err.hint else ""), path=err.path, line=err.line))
        names = self.ctx.by_name()
        for case in self.ctx.cases:
            if case.error is not None:
                continue
            if case.rule not in names:
                out.append(self.issue(self.CASE_RULE, f"{case.case_id}: no rule (or alias) {case.rule!r}",
                                      path=case.path, line=case.line, rule=case.rule))
            if case.top is not None and self.ctx.kb is not None and case.top not in self.ctx.kb:
                out.append(self.issue(self.CASE_MODE, f"{case.case_id}: top {case.top!r} has no kb entry",
                                      path=case.path, line=case.line, rule=case.rule))
        return out
