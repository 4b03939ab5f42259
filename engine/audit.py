"""Coverage audit (`precdx audit`): failure modes x the rules that support them x their test
cases x the collectors able to supply the facts each rule needs; uncovered modes, orphan rules
and fact types no rule reads. Renders as text, markdown or json (the dict itself).

A canonical failure mode (a kb entry with `canonical: true`) is covered when it has a kb entry
and at least one live (not deprecated) rule supporting it has at least one positive and at
least one negative test case (insufficient-evidence cases are counted and shown, but do not
stand in for a negative one). The audit counts runnable cases; `precdx rules test` runs them.
`coverage_percent` is the covered share of canonical modes.
"""
from __future__ import annotations

import textwrap
from collections import Counter
from pathlib import Path
from typing import Any, Iterable

from precdx.errors import PrecdxError
from precdx.facts import REGISTRY
from precdx.paths import rules_dir
from precdx.rulepack.lint import is_collectable, rule_fact_needs
from precdx.rulepack.loader import load_rules
from precdx.rulepack.ruletest import case_counts, load_cases

AUDIT_SCHEMA_VERSION = "1"
KINDS = ("positive", "negative", "insufficient")

# Collected fact types that no rule needs to read, each with the reason it was accepted. Every
# other collected fact type is evidence and must be read by some rule: `precdx audit` fails while
# one is not (a collector producing facts nobody weighs is either dead code or a missing rule).
# Keep this short; an entry here is a reviewed decision, not a way to silence the audit.
DESCRIPTIVE_FACT_TYPES: dict[str, str] = {
    "structure_summary": "the size of one run's model listing; the evidence is structure_diff",
    "library_version": "one run's installed versions; the evidence is library_diff between runs",
}


def _rule_row(lr: Any, counts: Counter, known_modes: set[str]) -> dict[str, Any]:
    rule = lr.rule
    needs_all, needs_any = rule_fact_needs(rule)
    reads = list(dict.fromkeys([*needs_all, *needs_any, *(p.fact for p in rule.when.none)]))
    collectors = {t: list(REGISTRY[t].collectors) if t in REGISTRY else [] for t in [*needs_all, *needs_any]}
    collectable = all(is_collectable(t) for t in needs_all) and (
        not needs_any or any(is_collectable(t) for t in needs_any))
    return {
        "id": rule.id, "name": rule.name, "status": rule.status, "path": lr.path, "line": lr.line,
        "failure_modes": list(rule.failure_modes), "against": list(rule.against), "symptom": rule.symptom,
        "fact_types": reads, "collectors": collectors, "collectable": collectable,
        "tests": {k: counts[k] for k in KINDS},
        "unknown_modes": [m for m in [*rule.failure_modes, *rule.against] if m not in known_modes],
    }


def build_audit(rules_path: str | Path | None = None, *, kb_path: str | Path | None = None,
                canonical_ids: Iterable[str] | None = None) -> dict[str, Any]:
    """The coverage report as a JSON-ready dict. `canonical_ids` overrides the canonical set
    (by default: the kb entries marked canonical); ids without a kb entry are then uncovered."""
    from precdx.kb import load_kb

    root = Path(rules_path) if rules_path else rules_dir()
    kb = load_kb(kb_path)
    loaded = load_rules(root)
    cases = load_cases(root)
    counts = case_counts(cases, [lr.rule for lr in loaded])
    canonical = set(canonical_ids) if canonical_ids is not None else {k for k, e in kb.items() if e.canonical}
    rule_rows = [_rule_row(lr, counts[lr.rule.id], set(kb)) for lr in loaded]

    mode_ids = sorted(set(kb) | canonical, key=lambda m: (m not in canonical, m))
    modes = []
    for mid in mode_ids:
        entry = kb.get(mid)
        supporting = [r for r in rule_rows if mid in r["failure_modes"]]
        live = [r for r in supporting if r["status"] != "deprecated"]
        tested = [r["id"] for r in live if r["tests"]["positive"] and r["tests"]["negative"]]
        totals = {k: sum(r["tests"][k] for r in live) for k in KINDS}
        missing = []
        if entry is None:
            missing.append("no kb entry")
        if not live:
            missing.append("no rule" if not supporting else "only deprecated rules")
        else:
            if not totals["positive"]:
                missing.append("no positive test")
            if not totals["negative"]:
                missing.append("no negative test")
            if totals["positive"] and totals["negative"] and not tested:
                missing.append("no rule has both a positive and a negative test")
        collectors = sorted({c for r in live for cs in r["collectors"].values() for c in cs})
        modes.append({
            "id": mid, "canonical": mid in canonical, "has_kb": entry is not None,
            "title": entry.title.en if entry is not None else None,
            "area": entry.area if entry is not None else None,
            "verdict": entry.verdict if entry is not None else None,
            "rules": [r["id"] for r in live], "deprecated_rules": [r["id"] for r in supporting if r not in live],
            "against_rules": [r["id"] for r in rule_rows if mid in r["against"]],
            "tests": totals, "tested_rules": tested,
            "collectors": collectors, "collectable": any(r["collectable"] for r in live),
            "covered": not missing, "missing": missing,
        })

    canon_rows = [m for m in modes if m["canonical"]]
    covered = sum(1 for m in canon_rows if m["covered"])
    read_types = {t for r in rule_rows for t in r["fact_types"]}
    broken = [{"case_id": c.case_id, "path": c.path, "line": c.line, "error": c.error} for c in cases if c.error]
    names = {n for lr in loaded for n in (lr.rule.id, *lr.rule.aliases)}
    return {
        "schema_version": AUDIT_SCHEMA_VERSION,
        "rules_path": str(root),
        "coverage_percent": round(100.0 * covered / len(canon_rows), 2) if canon_rows else 0.0,
        "canonical_total": len(canon_rows),
        "canonical_covered": covered,
        "uncovered": [{"id": m["id"], "missing": m["missing"]} for m in canon_rows if not m["covered"]],
        "modes": modes,
        "rules": rule_rows,
        "orphan_rules": [{"id": r["id"], "unknown_modes": r["unknown_modes"]} for r in rule_rows if r["unknown_modes"]],
        "untested_rules": [r["id"] for r in rule_rows
                           if r["status"] != "deprecated" and not (r["tests"]["positive"] and r["tests"]["negative"])],
        "uncollectable_rules": [r["id"] for r in rule_rows if not r["collectable"]],
        "unread_fact_types": sorted(t for t in set(REGISTRY) - read_types
                                    if _collected(t) and t not in DESCRIPTIVE_FACT_TYPES),
        "descriptive_fact_types": {t: why for t, why in sorted(DESCRIPTIVE_FACT_TYPES.items())
                                   if t in REGISTRY and t not in read_types},
        "stale_descriptive": sorted(t for t in DESCRIPTIVE_FACT_TYPES if t not in REGISTRY or t in read_types),
        "cases": {"total": len(cases), "broken": broken,
                  "unknown_rule": [c.case_id for c in cases if c.error is None and c.rule not in names]},
    }


def _collected(ftype: str) -> bool:
    """A fact type some collector (not only a person) produces."""
    return any(c != "user" for c in REGISTRY[ftype].collectors)


def audit_failures(report: dict[str, Any]) -> list[str]:
    """What makes `precdx audit` fail regardless of coverage: collected fact types no rule
    reads (outside the reviewed descriptive list), and stale entries of that list."""
    out = [f"fact type {t} is collected but no rule reads it (write a rule that weighs it, stop "
           "collecting it, or add it with a reason to DESCRIPTIVE_FACT_TYPES in engine/audit.py)"
           for t in report["unread_fact_types"]]
    out += [f"DESCRIPTIVE_FACT_TYPES lists {t}, which is unknown or now read by a rule: remove it"
            for t in report.get("stale_descriptive", [])]
    return out


# ------------------------------------------------------------------ rendering
def _table(headers: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    fmt = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa: E731
    return [fmt(headers), fmt(["-" * w for w in widths]), *(fmt(r) for r in rows)]


def _md_table(headers: list[str], rows: list[list[str]]) -> list[str]:
    esc = lambda s: s.replace("|", "\\|")  # noqa: E731
    return ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|",
            *("| " + " | ".join(esc(c) for c in r) + " |" for r in rows)]


def _mode_rows(report: dict[str, Any]) -> list[list[str]]:
    rows = []
    for m in report["modes"]:
        t = m["tests"]
        rows.append([m["id"], "yes" if m["canonical"] else "-", "yes" if m["has_kb"] else "NO",
                     ",".join(m["rules"]) or "-", str(t["positive"]), str(t["negative"]), str(t["insufficient"]),
                     ",".join(m["collectors"]) or "-", "covered" if m["covered"] else "; ".join(m["missing"])])
    return rows


def _rule_rows(report: dict[str, Any]) -> list[list[str]]:
    rows = []
    for r in report["rules"]:
        t = r["tests"]
        target = ",".join(r["failure_modes"]) or (f"symptom:{r['symptom']}" if r["symptom"] else
                                                   "against:" + ",".join(r["against"]))
        facts = ", ".join(f"{ft}({'/'.join(cs) or 'none'})" for ft, cs in r["collectors"].items())
        rows.append([r["id"], r["status"], target, str(t["positive"]), str(t["negative"]), str(t["insufficient"]),
                     facts, "yes" if r["collectable"] else "NO"])
    return rows


MODE_HEADERS = ["FAILURE MODE", "CANON", "KB", "RULES", "+", "-", "?", "COLLECTORS", "STATUS"]
RULE_HEADERS = ["RULE", "STATUS", "SUPPORTS", "+", "-", "?", "FACTS (COLLECTORS)", "COLLECTED"]


def _findings(report: dict[str, Any]) -> list[tuple[str, list[str]]]:
    out = [
        ("Uncovered canonical modes", [f"{u['id']}: {', '.join(u['missing'])}" for u in report["uncovered"]]),
        ("Orphan rules (support unknown modes)",
         [f"{o['id']}: {', '.join(o['unknown_modes'])}" for o in report["orphan_rules"]]),
        ("Rules without a positive and a negative test", list(report["untested_rules"])),
        ("Rules needing facts only a person can give", list(report["uncollectable_rules"])),
        ("Collected fact types no rule reads (the audit fails)", list(report["unread_fact_types"])),
        ("Descriptive fact types (reviewed: read by no rule on purpose)",
         [f"{t}: {why}" for t, why in report.get("descriptive_fact_types", {}).items()]),
        ("Broken test cases", [f"{b['case_id']} ({b['path']}:{b['line']}): {b['error']}"
                               for b in report["cases"]["broken"]]),
        ("Test cases naming unknown rules", list(report["cases"]["unknown_rule"])),
    ]
    return out


def _headline(report: dict[str, Any]) -> str:
    return (f"canonical coverage: {report['canonical_covered']}/{report['canonical_total']} "
            f"({report['coverage_percent']:.1f}%) -- {len(report['rules'])} rules, "
            f"{report['cases']['total']} test cases")


def render_audit(report: dict[str, Any], fmt: str = "text") -> str:
    if fmt == "json":
        import json
        return json.dumps(report, indent=2) + "\n"
    if fmt == "markdown":
        lines = ["# precdx coverage audit", "", f"Rules: `{report['rules_path']}`", "",
                 f"**{_headline(report)}**", "", "## Failure modes", "",
                 *_md_table(MODE_HEADERS, _mode_rows(report)), "", "## Rules", "",
                 *_md_table(RULE_HEADERS, _rule_rows(report))]
        for title, items in _findings(report):
            lines += ["", f"## {title} ({len(items)})", ""]
            lines += [f"- {i}" for i in items] or ["- none"]
        return "\n".join(lines) + "\n"
    if fmt != "text":
        raise PrecdxError(f"unknown audit format {fmt!r} (text, markdown or json)")
    lines = [f"precdx coverage audit -- rules: {report['rules_path']}", _headline(report), "",
             *_table(MODE_HEADERS, _mode_rows(report)), "", *_table(RULE_HEADERS, _rule_rows(report))]
    for title, items in _findings(report):
        lines += ["", f"{title} ({len(items)}):"]
        if items and not any(" " in i for i in items):  # bare names: fill lines, not one per line
            lines += textwrap.wrap(", ".join(items), 100, initial_indent="  ", subsequent_indent="  ")
        else:
            lines += [f"  {i}" for i in items] or ["  none"]
    lines += ["", "+ positive, - negative, ? insufficient-evidence test cases"]
    return "\n".join(lines) + "\n"
