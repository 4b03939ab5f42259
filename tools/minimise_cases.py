#!/usr/bin/env python3
"""Rewrite the rule pack into its current form; idempotent, safe to re-run after every merge.

Test files (rules/**/*.test.yaml):
  - `schema_version: 1` once at the top of the file;
  - each case says its kind up front: `id: positive-x` + `kind: positive` becomes `positive: x`;
  - the facts of such a case (one-line flow mappings `- {type: ...}`) lose the fields equal to
    what the loader fills in for a short-form case (model defaults and the case defaults of
    engine/facts/casedefaults.py), a case-default field the full case left out is written
    `field: null` (it stays absent), and former field names become the current ones. A case
    already in the short form, or one whose id does not start with its kind, stays as it is.
Rule files (rules/**/*.yaml):
  - `schema_version` once at the top of a `rules:` file instead of on every rule;
  - former fact field names (F(was=...)) become the current ones.

Comments and every other line stay as they are. Before a file is written, the script loads the
old and the new text with the rule pack's own loaders and refuses (exit 1, file untouched) unless
both mean exactly the same: the same cases with the same facts, or the same rules.

    python tools/minimise_cases.py            # rewrite rules/ in place
    python tools/minimise_cases.py --check    # exit 1 when some file is not in the current form
    python tools/minimise_cases.py PATH...    # only these files or folders
"""
from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from precdx.errors import PrecdxError  # noqa: E402
from precdx.facts import REGISTRY  # noqa: E402
from precdx.facts.base import upgrade_names  # noqa: E402
from precdx.facts.casedefaults import strip  # noqa: E402
from precdx.paths import rules_dir  # noqa: E402
from precdx.rulepack.loader import load_rule_file  # noqa: E402
from precdx.rulepack.ruletest import KINDS, SCHEMA_VERSION, load_test_file  # noqa: E402

FACT_LINE = re.compile(r"^(?P<indent>\s*)- (?P<body>\{type:.*\})\s*$")
CASE_ID = re.compile(r"^(?P<indent>\s*)- id: (?P<kind>positive|negative|insufficient)-(?P<rest>\S.*?)\s*$")
RULE_VERSION = re.compile(r"^(?P<indent>\s*)- schema_version: (?P<v>\d+)\s*$")


# ------------------------------------------------------------------ facts
def _flow(data: dict[str, Any]) -> str:
    text = yaml.safe_dump(data, default_flow_style=True, sort_keys=False, allow_unicode=True, width=1 << 20)
    return text.strip().removesuffix("...").strip()


def minimal_fact(data: dict[str, Any]) -> dict[str, Any]:
    spec = REGISTRY.get(data.get("type"))
    if spec is None:
        return data
    try:
        data = upgrade_names(spec, data)
    except PrecdxError:
        return data  # both names given: left for the loader to report
    return strip(data)


def _fact_line(line: str) -> str:
    m = FACT_LINE.match(line)
    if not m:
        return line
    try:
        data = yaml.safe_load(m.group("body"))
    except yaml.YAMLError:
        return line
    if not isinstance(data, dict):
        return line
    new = minimal_fact(data)
    if new == data and list(new) == list(data):
        return line
    return f"{m.group('indent')}- {_flow(new)}"


# ------------------------------------------------------------------ test files
def rewrite_test_text(text: str) -> str:
    lines = text.split("\n")
    out: list[str] = []
    converting = False  # inside a case being turned into the short form now
    i = 0
    while i < len(lines):
        line = lines[i]
        if re.match(r"^\s*- (id|positive|negative|insufficient):", line):
            converting = False
        m = CASE_ID.match(line)
        if m:
            # the `kind:` line of this case, before the next case starts
            kind_at = None
            j = i + 1
            while j < len(lines) and not lines[j].lstrip().startswith("- ") and lines[j].strip() != "" \
                    and lines[j].startswith(m.group("indent") + "  "):
                if lines[j].strip() == f"kind: {m.group('kind')}":
                    kind_at = j
                j += 1
            if kind_at is not None:
                out.append(f"{m.group('indent')}- {m.group('kind')}: {m.group('rest')}")
                out.extend(lines[i + 1:kind_at])
                i = kind_at + 1
                converting = True
                continue
        # facts of a full-form case that stays so, or of a case already short, stay as written
        out.append(_fact_line(line) if converting else line)
        i += 1
    text = "\n".join(out)
    if not re.search(r"^schema_version:", text, re.M):
        text = re.sub(r"^cases:", f"schema_version: {SCHEMA_VERSION}\ncases:", text, count=1, flags=re.M)
    return text


def _cases_of(path: Path) -> list[tuple]:
    out = []
    for c in load_test_file(path):
        out.append((c.case_id, c.rule, c.kind, c.top, c.note, c.error is None,
                    [f.model_dump(mode="json", exclude={"source"}) for f in c.facts]))
    return out


# ------------------------------------------------------------------ rule files
def rewrite_rule_text(text: str) -> str:
    lines = text.split("\n")
    versions = set()
    out = []
    for idx, line in enumerate(lines):
        m = RULE_VERSION.match(line)
        nxt = lines[idx + 1] if idx + 1 < len(lines) else ""
        if m and nxt.startswith(m.group("indent") + "  ") and not nxt.strip().startswith("- "):
            versions.add(m.group("v"))
            # `- schema_version: 1` + `    id: X`  ->  `- id: X`
            lines[idx + 1] = f"{m.group('indent')}- {nxt.strip()}"
            continue
        out.append(line)
    text = "\n".join(out)
    if versions and len(versions) == 1 and not re.search(r"^schema_version:", text, re.M):
        text = re.sub(r"^rules:", f"schema_version: {versions.pop()}\nrules:", text, count=1, flags=re.M)
    elif len(versions) > 1:
        return "\n".join(lines)  # mixed versions stay on their rules
    for spec in REGISTRY.values():
        for old, new in spec.renamed.items():
            text = re.sub(rf"\b{old}\b", new, text)
    return text


def _rules_of(path: Path) -> list[str]:
    return [lr.rule.model_dump_json() for lr in load_rule_file(path)]


# ------------------------------------------------------------------ driver
def _same(path: Path, new_text: str, reader) -> bool:
    with tempfile.TemporaryDirectory() as tmp:
        probe = Path(tmp) / path.name
        probe.write_text(new_text, encoding="utf-8")
        try:
            return reader(path) == reader(probe)
        except PrecdxError:
            return False


def process(path: Path, *, check: bool) -> str:
    """'same', 'changed' (or 'would change' with check) or 'refused'."""
    text = path.read_text(encoding="utf-8")
    if path.name.endswith(".test.yaml"):
        new, reader = rewrite_test_text(text), _cases_of
    else:
        new, reader = rewrite_rule_text(text), _rules_of
    if new == text:
        return "same"
    if not _same(path, new, reader):
        return "refused"
    if check:
        return "would change"
    path.write_text(new, encoding="utf-8")
    return "changed"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("paths", nargs="*", type=Path, help="files or folders (default: the rule pack)")
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 if a file would change")
    args = ap.parse_args(argv)
    files: list[Path] = []
    for p in args.paths or [rules_dir()]:
        files.extend(sorted(p.rglob("*.yaml")) if p.is_dir() else [p])
    status: dict[str, list[Path]] = {}
    for f in files:
        status.setdefault(process(f, check=args.check), []).append(f)
    for f in status.get("refused", []):
        print(f"refused (the rewrite would change what the file means): {f}", file=sys.stderr)
    for key in ("changed", "would change"):
        for f in status.get(key, []):
            print(f"{key}: {f}")
    print(", ".join(f"{len(v)} {k}" for k, v in sorted(status.items())))
    return 1 if status.get("refused") or (args.check and status.get("would change")) else 0


if __name__ == "__main__":
    sys.exit(main())
