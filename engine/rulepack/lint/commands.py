"""Command checks (C0xx): commands, options, flags and environment variables that rules and kb
entries tell people to run."""
from __future__ import annotations

from precdx.rulepack.lint.base import LintIssue, RuleEntry, Validator, issue_type


class CommandValidator(Validator):
    """Every command and every --flag / environment variable in rules and kb entries is checked
    against the tools' own option lists (engine/rulepack/commands.py and its data files)."""

    family = "command"
    TOOL = issue_type("C001", "unknown-command-option", "error",
                      "A command uses an msprobe sub-command/option, or a tool option or argument, that the "
                      "tool does not accept (msprobe CLI snapshot, tools.yaml).")
    FLAG = issue_type("C002", "unknown-framework-flag", "error",
                      "A --flag is declared by no Megatron, MindSpeed, MindSpeed-LLM, DeepSpeed or HF Trainer "
                      "release (framework_flags.json).")
    DEPRECATED = issue_type("C003", "deprecated-framework-flag", "warning",
                            "A --flag is deprecated or gone in current releases and the text does not say so.")
    ENV = issue_type("C004", "unknown-environment-variable", "error",
                     "An environment variable is not in env_vars.yaml, or a step sets one that is not documented.")
    ENV_VALUE = issue_type("C005", "invalid-environment-value", "error",
                           "A command sets an environment variable to a value its documentation does not accept.")
    IN_PLACE = issue_type("C006", "in-place-edit", "error",
                          "A command edits a file in place (sed -i): reruns must write a copy into a new run "
                          "folder so the evidence precdx reads stays intact.")
    CONFIG = issue_type("C007", "invalid-msprobe-config", "error",
                        "An msprobe config written by a command has an unknown key, task, level or mode.")
    issue_types = (TOOL, FLAG, DEPRECATED, ENV, ENV_VALUE, IN_PLACE, CONFIG)

    def _types(self):
        return {"msprobe": self.TOOL, "tool": self.TOOL, "flag": self.FLAG, "deprecated": self.DEPRECATED,
                "env": self.ENV, "env_value": self.ENV_VALUE, "in_place": self.IN_PLACE, "config": self.CONFIG}

    def validate(self, entry: RuleEntry) -> list[LintIssue]:
        from precdx.rulepack.commands import check_command, check_text

        rule = entry.rule
        kinds = self._types()
        out: list[LintIssue] = []
        texts: list[tuple[str, tuple]] = []
        for lang in ("en", "zh"):
            texts.append((getattr(rule.title, lang) or "", ("title",)))
            texts.append((getattr(rule.explanation, lang) or "", ("explanation",)))
        for i, fp in enumerate(rule.false_positives):
            texts.append((fp.en, ("false_positives", i)))
        for i, st in enumerate(rule.next_steps):
            texts.append((st.action.en, ("next_steps", i, "action")))
            if st.why is not None:
                texts.append((st.why.en, ("next_steps", i, "why")))
            if st.command:
                for f in check_command(st.command, st.action.en):
                    out.append(self.issue(kinds[f.kind], f"next_steps[{i}].command: {f.message}",
                                          entry, "next_steps", i, "command"))
        for text, loc in texts:
            for f in check_text(text):
                out.append(self.issue(kinds[f.kind], f"{'.'.join(map(str, loc))}: {f.message}", entry, *loc))
        return out

    def finalize(self) -> list[LintIssue]:
        from precdx.kb import kb_dir
        from precdx.rulepack.commands import check_command, check_text

        kinds = self._types()
        out: list[LintIssue] = []
        root = self.ctx.kb_root or kb_dir()
        for mode, kb in sorted((self.ctx.kb or {}).items()):
            path = root / kb.area / f"{mode}.yaml"
            lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []

            def line_of_text(needle: str) -> int | None:
                probe = needle.strip().splitlines()[0][:40] if needle.strip() else ""
                return next((n + 1 for n, ln in enumerate(lines) if probe and probe in ln), None)

            texts = [kb.meaning.en, kb.impact.en, kb.diagnosis.en, kb.mitigation.en, kb.title.en]
            texts += [s.en for s in kb.symptoms] + [c.why.en for c in kb.commands]
            for text in texts:
                for f in check_text(text):
                    out.append(self.issue(kinds[f.kind], f"kb {mode}: {f.message}", path=str(path),
                                          line=line_of_text(text)))
            for c in kb.commands:
                for f in check_command(c.command, c.why.en):
                    out.append(self.issue(kinds[f.kind], f"kb {mode} command: {f.message}", path=str(path),
                                          line=line_of_text(c.command.replace('"', '\\"')) or line_of_text(c.command)))
        return out
