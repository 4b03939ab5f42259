"""`precdx inspect`: what discovery found in a case (each recognised artefact with its kind and
the collector's detail, each ignored file with the reason) and the device each run shows."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from precdx.collectors.base import Case
from precdx.collectors.checklist.runs import guess_device
from precdx.discovery import discover_folder
from precdx.errors import Warnings


def inspect_folder(path: str | Path, warnings: Warnings | None = None) -> dict[str, Any]:
    """Discover a case folder, a run folder or one file and report what was found; discovery
    warnings are listed under `warnings`."""
    warnings = warnings if warnings is not None else Warnings()
    report = inspect_case(discover_folder(Path(path), warnings=warnings))
    if warnings.items:
        report.setdefault("warnings", warnings.items)
    return report


def inspect_case(case: Case) -> dict[str, Any]:
    """What discovery found: per run, each recognised artefact (kind, detail, which collector
    area) and each ignored file with the reason."""
    runs = []
    for run in case.runs:
        base = run.root if run.root.is_dir() else run.root.parent  # a run given as one file
        runs.append({
            "role": run.role,
            "name": run.name,
            "root": str(run.root),
            "group": run.group,
            "hosts": list(run.hosts),
            "device": guess_device(run),
            "recognised": [{"path": _rel(a.path, base), "kind": a.kind, "detail": a.detail}
                           for a in run.artefacts],
            "ignored": [{"path": _rel(p, base), "reason": why} for p, why in run.ignored],
        })
    return {"root": str(case.root) if case.root else None, "runs": runs}


def _rel(path: Path, base: Path) -> str:
    try:
        return str(path.relative_to(base))
    except ValueError:
        return str(path)


def render_inspect_text(report: dict[str, Any], *, max_ignored: int = 20) -> str:
    """Plain-text rendering of `inspect_case` for the terminal."""
    lines = []
    if report.get("root"):
        lines.append(f"case {report['root']}")
    for run in report["runs"]:
        head = f"{run['name']} ({run['role']}, device {run['device']})  {run['root']}"
        if run["hosts"]:
            head += f"  hosts: {', '.join(run['hosts'])}"
        lines.append(head)
        if not run["recognised"]:
            lines.append("  recognised: nothing")
        for art in _collapse(run["recognised"]):
            detail = f" [{art['detail']}]" if art.get("detail") else ""
            lines.append(f"  + {art['path']}: {art['kind']}{detail}")
        ignored = _collapse_ignored(run["ignored"])
        for item in ignored[:max_ignored]:
            lines.append(f"  - {item['path']}: ignored, {item['reason']}")
        if len(ignored) > max_ignored:
            lines.append(f"  - ... {len(ignored) - max_ignored} more ignored")
    return "\n".join(lines) + "\n"


def _collapse(arts: list[dict]) -> list[dict]:
    """Many files of one kind in one folder (dump ranks, monitor CSVs) shown as one line."""
    by_dir: dict[tuple[str, str, str], list[str]] = {}
    for a in arts:
        parent = str(Path(a["path"]).parent)
        by_dir.setdefault((parent, a["kind"], a.get("detail", "")), []).append(a["path"])
    out = []
    for (parent, kind, detail), paths in by_dir.items():
        if len(paths) > 3:
            out.append({"path": f"{parent}/ ({len(paths)} files)", "kind": kind, "detail": detail})
        else:
            out.extend({"path": p, "kind": kind, "detail": detail} for p in paths)
    return out


def _collapse_ignored(items: list[dict]) -> list[dict]:
    by_dir: dict[tuple[str, str], list[str]] = {}
    for it in items:
        by_dir.setdefault((str(Path(it["path"]).parent), it["reason"]), []).append(it["path"])
    out = []
    for (parent, reason), paths in by_dir.items():
        if len(paths) > 3:
            out.append({"path": f"{parent}/ ({len(paths)} files)", "reason": reason})
        else:
            out.extend({"path": p, "reason": reason} for p in paths)
    return out
