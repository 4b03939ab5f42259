"""Rule test cases (`rules/**/*.test.yaml`, beside the rules): find and load them, "these
facts -> this rule fires (positive) / does not fire (negative, insufficient) -> this failure
mode ranks first (optional `top`)". Running them needs the matchers and the diagnosis, which
sit above the rule pack: that is engine/rulerunner.py.

A case that cannot be run as written (malformed, duplicate id) is never dropped: it is loaded
with its `error` set, and the runner reports it as a failed result naming file:line.

    schema_version: 1                    # once per file (optional)
    cases:
      - positive: introduced-gelu        # the kind up front (positive | negative | insufficient)
        rule: OPD-001                    # the rule under test (id or an old alias)
        facts:                           # only the fields the case is about (see below)
          - {type: first_divergence, api: Functional.gelu.0.forward, kind: introduced, ...}
        top: operator.precision_defect   # optional: must rank first in diagnose()
        note: why this case exists       # optional, free text

The case id is "<kind>-<id>" ("positive-introduced-gelu"), unique within the file. A fact of
a short-form case lists the fields its case is about; the fields it leaves out get the model's
defaults and the case defaults of engine/facts/casedefaults.py (the target against the
baseline, msprobe step 0 of rank 0, zero counts), and `field: null` keeps one absent (a bot's
partial payload). The older full form, `id: positive-introduced-gelu` with `kind: positive`, is
read exactly as written (no case defaults), so a full case means what it always meant. Former
field names are read under their current names in both. tools/minimise_cases.py rewrites full
cases into the short form.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from precdx.errors import PrecdxError
from precdx.facts import REGISTRY, Fact, FactSet, parse_fact
from precdx.facts.casedefaults import fill
from precdx.paths import rules_dir
from precdx.yamlsafe import LineDict, line_of, load_yaml_file

KINDS = ("positive", "negative", "insufficient")
CASE_KEYS = ("id", "rule", "kind", "facts", "top", "note")
REQUIRED_KEYS = ("id", "rule", "kind", "facts")
SCHEMA_VERSION = 1
TEST_SUFFIX = ".test.yaml"
_CASE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class RuleCase:
    """One test case as written. `error` is set when the case cannot be run as written."""

    case_id: str                    # "<RULE>-<id>": what `pytest -k` and `rules test -k` select on
    rule: str
    kind: str
    facts: tuple[Fact, ...]
    path: str
    line: int | None
    top: str | None = None
    note: str | None = None
    error: str | None = None

    @property
    def where(self) -> str:
        return self.path + (f":{self.line}" if self.line else "")


# ------------------------------------------------------------------ discovery and loading
def case_files(rules_path: str | Path | None = None) -> list[Path]:
    """Every `*.test.yaml` below the rule folder (or the one beside a single rule file)."""
    root = Path(rules_path) if rules_path else rules_dir()
    if root.is_file():
        if root.name.endswith(TEST_SUFFIX):
            return [root]
        sibling = root.with_name(root.name[: -len(root.suffix)] + TEST_SUFFIX)
        return [sibling] if sibling.is_file() else []
    if not root.is_dir():
        raise PrecdxError("rule directory not found", path=str(root))
    return sorted(root.rglob("*" + TEST_SUFFIX))


def _plain(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_plain(v) for v in obj]
    return obj


def _broken(path: str, line: int | None, message: str, case_id: str, rule: str = "?",
            kind: str = "?") -> RuleCase:
    return RuleCase(case_id=case_id, rule=rule, kind=kind, facts=(), path=path, line=line, error=message)


class _ShortCase(LineDict):
    """A case written in the short form (its facts get the case defaults)."""


def _short_form(item: LineDict) -> LineDict:
    """`{positive: X, ...}` read as `{id: positive-X, kind: positive, ...}` (lines kept)."""
    kinds = [k for k in KINDS if k in item]
    if len(kinds) != 1 or "id" in item or "kind" in item:
        return item
    kind = kinds[0]
    value = item[kind]
    full = _ShortCase()
    full.line = item.line
    for key, val in item.items():
        if key == kind:
            full["id"] = f"{kind}-{value}" if isinstance(value, str) and value else value
            full["kind"] = kind
            full.key_lines["id"] = full.key_lines["kind"] = item.key_lines.get(key, item.line)
        else:
            full[key] = val
            full.key_lines[key] = item.key_lines.get(key, item.line)
    return full


def case_fact(raw: Any, *, short: bool = True) -> Any:
    """A test case's fact mapping as the vocabulary reads it. In a short-form case the fields it
    leaves out get the case defaults (a field given under its former name counts as given) and
    `field: null` keeps a field absent; a full-form case is read exactly as written."""
    raw = _plain(raw)
    if short and isinstance(raw, dict) and isinstance(raw.get("type"), str) and raw["type"] in REGISTRY:
        return fill(raw, REGISTRY[raw["type"]].renamed)
    return raw


def _parse_case(item: Any, path: str, index: int) -> RuleCase:
    line = line_of(item)
    if not isinstance(item, dict):
        return _broken(path, line, f"case #{index + 1} must be a mapping", f"?-case{index + 1}")
    if isinstance(item, LineDict):
        item = _short_form(item)
    short = isinstance(item, _ShortCase)
    raw_rule, raw_id = item.get("rule"), item.get("id")
    rule = raw_rule if isinstance(raw_rule, str) and raw_rule else "?"
    cid = raw_id if isinstance(raw_id, str) and raw_id else f"case{index + 1}"
    case_id = f"{rule}-{cid}"
    kind = item.get("kind") if isinstance(item.get("kind"), str) else "?"

    def broken(msg: str, key: str | None = None) -> RuleCase:
        return _broken(path, line_of(item, key) if key else line, msg, case_id, rule, kind)

    unknown = [k for k in item if k not in CASE_KEYS]
    if unknown:
        return broken(f"unknown key {unknown[0]!r} (a case has {', '.join(CASE_KEYS)})", unknown[0])
    missing = [k for k in REQUIRED_KEYS if k not in item]
    if missing:
        return broken(f"case #{index + 1} is missing {', '.join(repr(k) for k in missing)}")
    if not isinstance(raw_id, str) or not _CASE_ID.match(raw_id):
        return broken(f"case id {raw_id!r} must be letters, digits, '.', '_' or '-'", "id")
    if not isinstance(raw_rule, str) or not raw_rule.strip():
        return broken("'rule' must name a rule id", "rule")
    if kind not in KINDS:
        return broken(f"kind {item.get('kind')!r} is not one of {', '.join(KINDS)}", "kind")
    top = item.get("top")
    if top is not None and (not isinstance(top, str) or not top):
        return broken("'top' must be a failure-mode id", "top")
    note = item.get("note")
    if note is not None and not isinstance(note, str):
        return broken("'note' must be text", "note")
    raw_facts = item["facts"]
    if not isinstance(raw_facts, list):
        return broken("'facts' must be a list of facts", "facts")
    facts = FactSet()
    for j, fact in enumerate(raw_facts):
        fline = line_of(fact) or line_of(item, "facts")
        try:
            facts.add(parse_fact(case_fact(fact, short=short), where=path))
        except PrecdxError as exc:
            return _broken(path, fline, f"fact #{j + 1}: {exc.message}" + (f" ({exc.hint})" if exc.hint else ""),
                           case_id, rule, kind)
    return RuleCase(case_id=case_id, rule=raw_rule, kind=kind, facts=tuple(facts), path=path, line=line,
                    top=top, note=note)


def load_test_file(path: Path) -> list[RuleCase]:
    spath = str(path)
    try:
        doc = load_yaml_file(spath)
    except PrecdxError as exc:
        return [_broken(spath, exc.line, exc.message, f"{path.name}-load")]
    if not isinstance(doc, LineDict) or "cases" not in doc:
        return [_broken(spath, line_of(doc), "a test file is a mapping with a 'cases' list", f"{path.name}-load")]
    extra = [k for k in doc if k not in ("cases", "schema_version")]
    if extra:
        return [_broken(spath, line_of(doc, extra[0]), f"unknown top-level key {extra[0]!r} (only "
                        "'schema_version' and 'cases')", f"{path.name}-load")]
    version = doc.get("schema_version", SCHEMA_VERSION)
    if version != SCHEMA_VERSION:
        return [_broken(spath, line_of(doc, "schema_version"), f"unsupported schema_version {version!r} "
                        f"(this precdx reads test files of schema_version {SCHEMA_VERSION})", f"{path.name}-load")]
    items = doc["cases"]
    if not isinstance(items, list):
        return [_broken(spath, line_of(doc, "cases"), "'cases' must be a list", f"{path.name}-load")]
    if not items:
        return [_broken(spath, line_of(doc, "cases"), "'cases' is empty", f"{path.name}-load")]
    cases: list[RuleCase] = []
    first_line: dict[str, int | None] = {}
    for i, item in enumerate(items):
        if isinstance(item, LineDict):
            item = _short_form(item)
        case = _parse_case(item, spath, i)
        raw_id = item.get("id") if isinstance(item, dict) else None
        if isinstance(raw_id, str):
            if raw_id in first_line:
                prior = first_line[raw_id]
                case = _broken(spath, line_of(item), f"duplicate case id {raw_id!r} in this file"
                               + (f" (first at line {prior})" if prior else ""), case.case_id, case.rule, case.kind)
            else:
                first_line[raw_id] = line_of(item)
        cases.append(case)
    return cases


def load_cases(rules_path: str | Path | None = None) -> list[RuleCase]:
    """Every case of every test file, in file order. Cases that cannot run carry `error`.
    A full case id ("<RULE>-<id>") that appears in two files is an error on the second."""
    cases: list[RuleCase] = []
    seen: dict[str, RuleCase] = {}
    for path in case_files(rules_path):
        for case in load_test_file(path):
            prior = seen.get(case.case_id)
            if case.error is None and prior is not None and prior.path != case.path:
                case = _broken(case.path, case.line, f"case id {case.case_id!r} also used at {prior.where}",
                               case.case_id, case.rule, case.kind)
            seen.setdefault(case.case_id, case)
            cases.append(case)
    return cases


def case_counts(cases: Iterable[RuleCase], rules: Iterable[Any]) -> dict[str, Counter]:
    """Rule id -> Counter of runnable cases by kind ("positive", "negative", "insufficient").
    Cases naming an old id (alias) count for the rule that carries it; broken cases never count."""
    rules = list(rules)
    owner = {}
    for r in rules:
        for name in (r.id, *getattr(r, "aliases", ())):
            owner.setdefault(name, r.id)
    counts: dict[str, Counter] = {r.id: Counter() for r in rules}
    for case in cases:
        if case.error is None and case.rule in owner:
            counts[owner[case.rule]][case.kind] += 1
    return counts
