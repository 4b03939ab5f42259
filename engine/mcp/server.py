"""The MCP server: tools and resources over the same engine calls the CLI makes.

Tools (each returns JSON; bad input is a tool error naming the file and the problem, the same
one line the CLI prints, never a crash):

- `diagnose_case`  a case folder (baseline/, target/, ...) or runs given one by one (folders or
                   single log / tracking files) -> the `precdx diagnose --format json` object
- `diagnose_facts` facts given directly (the `precdx facts --format json` shape) -> the same
- `explain`        a rule id or a failure-mode id (case-insensitive) -> its definition
- `list_failure_modes` the canonical failure modes (id, area, verdict, title, rules)
- `next_evidence`  for a case or facts: the evidence worth getting next, best value first

Resources: `precdx://kb/<failure mode>` for each knowledge-base entry (Markdown, English and
Chinese), and `precdx://failure-modes` (the catalogue as JSON).
"""
from __future__ import annotations

import json
from typing import Any

from precdx.errors import PrecdxError, Warnings
from precdx.vocabulary import Lang

KB_URI = "precdx://kb/{mode}"
MAX_FACTS = 50_000


# ------------------------------------------------------------------ the engine calls (no MCP here)
def _require_case(case_dir: str | None, target: str | None) -> None:
    if not (case_dir or target):
        raise PrecdxError("give case_dir (a folder holding baseline/ and target/), or target (and baseline)")


def _facts_from_list(facts: list[dict[str, Any]]):
    from precdx.facts import FactSet, parse_fact

    if not isinstance(facts, list):
        raise PrecdxError("facts must be a list of fact objects (each with a 'type')")
    if len(facts) > MAX_FACTS:
        raise PrecdxError(f"{len(facts)} facts in one call (limit {MAX_FACTS})")
    out = FactSet()
    for i, item in enumerate(facts):
        out.add(parse_fact(item, where=f"facts[{i}]"))
    return out


def _as_json(diag) -> dict[str, Any]:
    return json.loads(diag.model_dump_json())


def diagnose_case(case_dir: str | None = None, target: str | None = None, baseline: str | None = None,
                  target_reruns: list[str] | None = None, baseline_reruns: list[str] | None = None,
                  lang: Lang = "en") -> dict[str, Any]:
    from precdx import api

    _require_case(case_dir, target)
    return _as_json(api.diagnose_case(case_dir, target=target, baseline=baseline,
                                      target_reruns=list(target_reruns or []),
                                      baseline_reruns=list(baseline_reruns or []), lang=lang).diagnosis)


def diagnose_facts(facts: list[dict[str, Any]], lang: Lang = "en") -> dict[str, Any]:
    from precdx import api

    return _as_json(api.diagnose_case(facts=_facts_from_list(facts), lang=lang).diagnosis)


def explain(name: str, lang: Lang = "en") -> dict[str, Any]:
    from precdx.explain import explain as do_explain

    data = json.loads(do_explain(name, lang=lang, fmt="json"))
    data["text"] = do_explain(name, lang=lang, fmt="text")
    return data


def list_failure_modes(area: str | None = None, lang: Lang = "en") -> list[dict[str, Any]]:
    from precdx.diagnosis import load_pack
    from precdx.kb import load_kb

    pack = load_pack()
    out = []
    for mid, entry in sorted(load_kb().items()):
        if area and entry.area != area:
            continue
        rules = [r.id for r in pack.rules if mid in r.rule.failure_modes]
        out.append({"id": mid, "area": entry.area, "verdict": entry.verdict, "canonical": entry.canonical,
                    "title": entry.text("title", lang), "rules": rules, "resource": KB_URI.format(mode=mid)})
    if area and not out:
        areas = sorted({e.area for e in load_kb().values()})
        raise PrecdxError(f"no failure mode in area {area!r}", hint="areas: " + ", ".join(areas))
    return out


def next_evidence(case_dir: str | None = None, target: str | None = None, baseline: str | None = None,
                  facts: list[dict[str, Any]] | None = None, limit: int = 5,
                  lang: Lang = "en") -> dict[str, Any]:
    from precdx.api import gather
    from precdx.diagnosis import diagnose
    from precdx.planner.nextbest import plan

    if not (case_dir or target or facts):
        raise PrecdxError("give case_dir, target (and baseline), or facts")
    warnings = Warnings()
    with_runs = bool(case_dir or target)  # a baseline alone is no case: only the facts are used

    def given():  # read after the runs' facts, as they are added
        if facts:
            yield from _facts_from_list(facts)

    all_facts = gather(case_dir, target=target, baseline=baseline if with_runs else None, facts=given(),
                       warnings=warnings).facts
    diag = diagnose(all_facts, engine="python", lang=lang, warnings=warnings)
    steps = plan(all_facts, engine="python", lang=lang, diag=diag, limit=max(1, min(limit, 50)))
    return {"verdict": diag.verdict,
            "top": diag.hypotheses[0].failure_mode if diag.hypotheses else None,
            "suggestions": [s.model_dump(mode="json") for s in steps],
            "warnings": warnings.items}


def kb_markdown(mode: str) -> str:
    """One knowledge-base entry as Markdown, English then Chinese."""
    from precdx.kb import load_kb

    kb = load_kb()
    if mode not in kb:
        raise PrecdxError(f"no knowledge-base entry {mode!r}", hint="see the precdx://failure-modes resource")
    e = kb[mode]
    parts = [f"# {e.id}: {e.text('title', 'en')} / {e.text('title', 'zh')}",
             f"area: {e.area} · verdict: {e.verdict} · confidence: {e.confidence}"]
    for lang, heads in (("en", ("Meaning", "Impact", "Diagnosis", "Mitigation", "Symptoms")),
                        ("zh", ("含义", "影响", "诊断", "缓解", "症状"))):
        for head, fld in zip(heads, ("meaning", "impact", "diagnosis", "mitigation")):
            parts.append(f"## {head}\n\n{e.text(fld, lang).strip()}")
        parts.append(f"## {heads[4]}\n\n" + "\n".join(f"- {s}" for s in e.symptom_texts(lang)))
    if e.commands:
        parts.append("## Commands / 命令\n\n" + "\n".join(
            f"- `{c.command}`: {c.why.get('en')} / {c.why.get('zh')}" for c in e.commands))
    if e.related:
        parts.append("## Related / 相关\n\n" + "\n".join(f"- {KB_URI.format(mode=r)}" for r in e.related))
    parts.append("## References / 参考\n\n" + "\n".join(f"- {r}" for r in e.references))
    return "\n\n".join(parts) + "\n"


# ------------------------------------------------------------------ the MCP server
def build_server():
    """The MCPServer with precdx's tools and resources (needs the `mcp` package)."""
    from mcp.server import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.server.mcpserver.resources import TextResource

    from precdx import __version__
    from precdx.kb import load_kb

    server = MCPServer(
        "precdx", version=__version__,
        instructions=("precdx diagnoses accuracy problems in large-model training migrations (GPU -> Ascend "
                      "NPU). Call diagnose_case with a case folder (baseline/, target/) or with target and "
                      "baseline run folders or log files; the answer ranks failure modes with evidence and "
                      "next steps. explain and the precdx://kb/<mode> resources say what a failure mode "
                      "means and how to fix it; next_evidence says what to collect next."))

    def guarded(fn):
        """Bad input becomes a tool error with the CLI's one-line message."""
        import functools

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except PrecdxError as exc:
                raise ToolError(exc.render()) from None
        return wrapper

    server.tool(description="Diagnose a training run pair: case_dir (a folder holding baseline/ and target/, "
                            "optionally target_rerun*/ baseline_rerun*/) or target and baseline (run folders, "
                            "or single training-log / TensorBoard / W&B / MLflow / CSV files). Returns the "
                            "diagnosis: verdict, symptoms, ranked hypotheses with evidence and next steps, "
                            "near misses, facts and warnings.")(guarded(diagnose_case))
    server.tool(description="Diagnose facts given directly (objects with a 'type' and its fields, as "
                            "`precdx facts --format json` prints them). Returns the same diagnosis object.")(
        guarded(diagnose_facts))
    server.tool(description="Explain a rule (e.g. CFG-001) or a failure mode (e.g. operator.precision_defect); "
                            "ids are case-insensitive.")(guarded(explain))
    server.tool(description="List the failure modes precdx knows (optionally of one area), with their rules "
                            "and knowledge-base resource URIs.")(guarded(list_failure_modes))
    server.tool(description="The evidence worth getting next for a case (case_dir or target/baseline) and/or "
                            "facts: questions to answer, facts to add, experiments to run, best value (expected "
                            "information gain per cost) first.")(guarded(next_evidence))

    for mid, entry in sorted(load_kb().items()):
        server.add_resource(TextResource(
            uri=KB_URI.format(mode=mid), name=mid, title=entry.text("title", "en"),
            description=f"{entry.area}: {entry.text('title', 'en')} / {entry.text('title', 'zh')}",
            mime_type="text/markdown", text=kb_markdown(mid)))

    @server.resource("precdx://failure-modes", name="failure-modes", mime_type="application/json",
                     description="The failure-mode catalogue (id, area, verdict, title, rules).")
    def failure_modes() -> str:
        return json.dumps(list_failure_modes(), ensure_ascii=False, indent=2)

    return server


def main() -> None:
    """Serve over stdio until the client closes the connection."""
    import logging

    from precdx import progress

    progress.set_quiet(True)  # stdout carries the protocol only
    logging.basicConfig(level=logging.WARNING)
    build_server().run("stdio")
