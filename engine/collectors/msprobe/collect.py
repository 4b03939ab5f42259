"""Turning a case's msprobe artefacts into facts: which dumps to compare with which, running
the per-rank tasks through an executor, and building the facts from their reports."""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Iterable, Iterator

from precdx.collectors.base import Case, RunDir
from precdx.collectors.msprobe import analysis_json, api_checks, compare_result, config_check, monitor
from precdx.collectors.msprobe.comparison import SideScan, compare_pairs
from precdx.collectors.msprobe.dumpdir import DumpDir, DumpHeader, locate
from precdx.collectors.msprobe.executor import (
    Executor, InlineExecutor, LocalProcessExecutor, cpu_count, default_executor)
from precdx.collectors.msprobe.localise import (
    Located, classify_divergence, classify_nondeterminism, locate_first_nan)
from precdx.collectors.msprobe.naming import api_family, parse_entry_name
from precdx.collectors.msprobe.progress import Progress
from precdx.collectors.msprobe.tasks import DumpTask, SideReport, TaskReport, run_task
from precdx.errors import PrecdxError, Warnings
from precdx.facts import Fact, make

_RERUN_OF = {"target_rerun": "target", "baseline_rerun": "baseline"}
PARAMS_MOVED = 1e-4   # relative statistics error of a weight beyond cross-device noise


def _dumps(run: RunDir, warnings: Warnings) -> dict[tuple[int, int], DumpDir]:
    found: dict[tuple[int, int], DumpDir] = {}
    for art in run.files("msprobe.dump"):
        d = locate(art.path)
        key = (d.step, d.rank)
        if key in found:
            warnings.add(f"two dumps for step {d.step} rank {d.rank} in run {run.name}; using "
                         f"{found[key].path}", path=str(art.path))
            continue
        found[key] = d
    return found


def plan_tasks(case: Case, warnings: Warnings) -> list[tuple[DumpTask, RunDir, RunDir | None, int, int]]:
    """(task, run, against, step, rank) for every comparison and every dump left unpaired."""
    dumps = {id(r): _dumps(r, warnings) for r in case.runs}
    plan: list[tuple[DumpTask, RunDir, RunDir | None, int, int]] = []
    covered: set[tuple[int, int, int]] = set()   # (run id, step, rank) read by some task

    def pair(run: RunDir, against: RunDir, exact: bool) -> None:
        mine, theirs = dumps[id(run)], dumps[id(against)]
        if not mine or not theirs:
            return
        for key in sorted(mine):
            if key in theirs:
                plan.append((DumpTask(str(mine[key].path), str(theirs[key].path), exact), run, against, *key))
                covered.add((id(run), *key))
                covered.add((id(against), *key))
            else:
                warnings.add(f"run {run.name} has a dump of step {key[0]} rank {key[1]} but run "
                             f"{against.name} has none: not compared", path=str(mine[key].path))
        for key in sorted(set(theirs) - set(mine)):
            warnings.add(f"run {against.name} has a dump of step {key[0]} rank {key[1]} but run "
                         f"{run.name} has none: not compared", path=str(theirs[key].path))

    baseline = case.main("baseline")
    for run in case.by_role("target"):
        if baseline is not None:
            pair(run, baseline, exact=False)
    for run in case.runs:
        base_role = _RERUN_OF.get(run.role)
        if base_role:
            original = case.main(base_role)
            if original is not None:
                pair(run, original, exact=True)
    for run in case.runs:
        for key, d in sorted(dumps[id(run)].items()):
            if (id(run), *key) not in covered:
                plan.append((DumpTask(str(d.path)), run, None, *key))
    return plan


def collect_dump_facts(case: Case, warnings: Warnings, *, quiet: bool = False,
                       executor: Executor | None = None) -> Iterator[Fact]:
    """Facts from every msprobe dump of the case (comparison, first NaN, structure)."""
    plan = plan_tasks(case, warnings)
    if not plan:
        return
    executor = executor or default_executor()
    progress = Progress("msprobe: comparing dumps", quiet=quiet)
    reports: list[tuple[TaskReport, RunDir, RunDir | None, int, int]] = []
    try:
        for i, rep in enumerate(executor.map(run_task, _spread([p[0] for p in plan], executor))):
            _, run, against, step, rank = plan[i]
            reports.append((rep, run, against, step, rank))
            progress.update(i + 1, len(plan), " dumps")
    finally:
        progress.close()
    yield from _facts_from_reports(reports, warnings)


def _spread(tasks: list[DumpTask], executor: Executor) -> list[DumpTask]:
    """On this machine, cores the pool leaves idle go to the pairs themselves: with fewer pairs
    than cores each pair is compared by several processes (split.compare_dumps_split). A
    cluster executor spreads over ranks only."""
    if not isinstance(executor, (LocalProcessExecutor, InlineExecutor)):
        return tasks
    parts = cpu_count() // max(1, len(tasks))
    if parts < 2:
        return tasks
    return [replace(t, parts=parts) if t.against_dump is not None else t for t in tasks]


def _side_fact(side: SideReport, run: RunDir, step: int, rank: int) -> Fact:
    return make("dump_info", role=run.role, run=run.name, step=step, rank=rank, task=side.task,
                level=side.level, summary_mode=side.summary_mode if side.summary_mode in
                ("statistics", "md5", "xor") else "none", framework=side.framework,
                api_count=side.api_count, module_count=side.module_count,
                nonfinite_count=side.nonfinite_count, has_stack=side.has_stack,
                has_construct=side.has_construct, complete=side.complete, source=side.path)


def _facts_from_reports(reports, warnings: Warnings) -> Iterator[Fact]:
    seen_info: set[tuple[str, int, int]] = set()
    nan_by: dict[tuple[int, int, int], tuple[Located, RunDir, str]] = {}   # (run id, step, rank)
    nan_runs: dict[int, RunDir] = {}
    baseline_abnormal: dict[tuple[int, int, int], bool | None] = {}
    for rep, run, against, step, rank in reports:
        for msg, path in rep.warnings:
            warnings.add(msg, path=path)
        if rep.fatal:
            warnings.add(rep.fatal, path=rep.task.run_dump)
            continue
        for side, r in ((rep.run, run), (rep.against, against)):
            if side is None or r is None:
                continue
            if (r.name, step, rank) not in seen_info:
                seen_info.add((r.name, step, rank))
                yield _side_fact(side, r, step, rank)
            if side.first_nan is not None and (id(r), step, rank) not in nan_by:
                nan_by[(id(r), step, rank)] = (side.first_nan, r, side.path)
                nan_runs[id(r)] = r
        if against is None:
            continue
        if not rep.task.exact:
            baseline_abnormal[(id(run), step, rank)] = rep.nan_baseline_abnormal
        yield from _pair_facts(rep, run, against, step, rank)
    yield from _nan_facts(nan_by, nan_runs, baseline_abnormal)


def _pair_facts(rep: TaskReport, run: RunDir, against: RunDir, step: int, rank: int) -> Iterator[Fact]:
    src = f"{rep.task.run_dump}, {rep.task.against_dump}"
    n_unmatched = sum(rep.run_only.values()) + sum(rep.against_only.values())
    mode = rep.mode or "statistics"
    all_match = rep.n_diverged == 0 and rep.n_error == 0 and n_unmatched == 0 and rep.first is None
    yield make("dump_step_compare", run=run.name, role=run.role, against=against.name,
               against_role=against.role, step=step, rank=rank, mode=mode, all_match=all_match,
               n_compared=rep.n_compared, n_error=rep.n_error, n_warning=rep.n_warning,
               n_diverged=rep.n_diverged, n_unmatched=n_unmatched, n_fallback=rep.n_fallback,
               max_output_rel_err=rep.max_out_err, source=src)
    f = rep.first
    if f is not None and rep.task.exact:
        yield make("nondeterministic_api", run=run.name, role=run.role, against=against.name,
                   against_role=against.role, step=step, rank=rank,
                   mode="md5" if mode == "md5" else "exact", api=f.api, api_name=f.api_name,
                   family=f.family, direction=f.direction, kind=f.kind, module=f.module,
                   code_line=f.code_line, order_index=f.order, output_rel_err=_finite(f.output_rel_err),
                   source=src)
    elif f is not None:
        yield make("first_divergence", run=run.name, role=run.role, against=against.name,
                   against_role=against.role, step=step, rank=rank, method="ours", api=f.api,
                   api_name=f.api_name, family=f.family, direction=f.direction, kind=f.kind,
                   reason=f.reason, dtype=f.dtype, dtype_against=f.dtype_against, module=f.module,
                   code_line=f.code_line, input_rel_err=f.input_rel_err,
                   output_rel_err=f.output_rel_err, order_index=f.order,
                   label=f.label if f.label in ("error", "warning") else "warning",
                   matched_by=f.matched_by, after_loss=f.after_loss, source=src)
    names = []
    for side_name, counts in (("run_only", rep.run_only), ("against_only", rep.against_only)):
        for (kind, name), count in sorted(counts.items()):
            names.append(f"{side_name}:{name}")
            yield make("dump_structure_diff", run=run.name, against=against.name, step=step, rank=rank,
                       kind=kind, name=name.split(".", 1)[1] if kind == "module" else name,
                       side=side_name, count=count, source=src)
    yield make("dump_structure_summary", run=run.name, against=against.name, step=step, rank=rank,
               same_structure=not names, n_run_only=len(rep.run_only), n_against_only=len(rep.against_only),
               names=", ".join(names[:50]) or None, source=src)


def _nan_facts(nan_by, nan_runs, baseline_abnormal) -> Iterator[Fact]:
    by_run_step: dict[tuple[int, int], list[tuple[int, Located]]] = defaultdict(list)
    for (rid, step, rank), (loc, _run, _path) in nan_by.items():
        by_run_step[(rid, step)].append((rank, loc))
    origin: dict[tuple[int, int], int] = {}
    for key, items in by_run_step.items():
        sources = [(loc.order, rank) for rank, loc in items if loc.kind != "communication"]
        pool = sources or [(loc.order, rank) for rank, loc in items]
        origin[key] = min(pool)[1]
    for (rid, step, rank), (loc, run, path) in sorted(nan_by.items(), key=lambda kv: kv[0][1:]):
        twin = baseline_abnormal.get((rid, step, rank))
        o = origin[(rid, step)]
        yield make("first_nan", run=run.name, role=run.role, step=step, rank=rank, method="ours",
                   api=loc.api, api_name=loc.api_name, family=loc.family, direction=loc.direction,
                   kind=loc.kind, value=loc.value, module=loc.module, code_line=loc.code_line,
                   order_index=loc.order, baseline_finite=None if twin is None else not twin,
                   origin_rank=o, is_origin_rank=(o == rank), source=path)


# ---- artefacts other than dumps -------------------------------------------------------------

def _finite(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


def _guard(warnings: Warnings, path: Path, fn, *args):
    """Run one reader; a bad file becomes a warning naming it (other artefacts still count)."""
    try:
        return fn(path, *args)
    except PrecdxError as exc:
        warnings.add(exc.message if exc.path else exc.render(), path=exc.path or str(path), line=exc.line)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        warnings.add(f"cannot read: {exc}", path=str(path))
    return None


def collect_other_facts(case: Case, warnings: Warnings,
                        covered: set[tuple[str, int, int]] | None = None) -> Iterator[Fact]:
    """Facts from msprobe's own outputs (compare results, analyses, monitor, checks).
    `covered`: (run, step, rank) of the dumps our own comparison read."""
    for run in case.runs:
        yield from _compare_results(case, run, warnings, covered or set())
        yield from _analyses(run, warnings)
        yield from _checks(run, warnings)
    yield from _monitor(case, warnings, {run for run, _step, _rank in (covered or set())})


def _partner(case: Case, run: RunDir) -> tuple[RunDir | None, str, str, bool]:
    """Who a compare result in `run`'s folder was compared with (msprobe compare -tp is the run
    whose folder holds it): (run, name, role, exact). A rerun is compared with its original
    (exactly: any difference counts), the target with the baseline, the baseline with the target."""
    if run.role in _RERUN_OF:
        role = _RERUN_OF[run.role]
        exact = True
    else:
        role = "target" if run.role == "baseline" else "baseline"
        exact = False
    other = case.main(role)
    return other, (other.name if other is not None else role), role, exact


def _compare_results(case: Case, run: RunDir, warnings: Warnings,
                     covered: set[tuple[str, int, int]]) -> Iterator[Fact]:
    """Facts from msprobe compare results. Each result's rows go through the same comparison and
    localisation as two dumps (the target and bench statistics of every tensor are in the rows):
    first divergence and its kind, the rerun difference, the first NaN, one-sided APIs. Dump-level
    facts are left to our own dump comparison when the run's dump of that step/rank was read."""
    placed: set[tuple[int, int, bool]] = set()   # one localisation per step/rank and kind (first file wins)
    nan_by: dict[tuple[int, int], tuple[Located, str, bool | None]] = {}
    other, folder_against, folder_role, folder_exact = _partner(case, run)
    for art in sorted(run.files("msprobe.compare_result"), key=lambda a: str(a.path)):
        res = _guard(warnings, art.path, compare_result.read_compare_result, warnings)
        if res is None:
            continue
        against, against_role, exact = folder_against, folder_role, folder_exact
        if not exact and res.same_device:
            # a rerun comparison found in the run's own folder: told by its rows
            against, against_role, exact = f"{run.name} (another launch)", run.role, True
        errors = sum(1 for a in res.apis if a.label == "error")
        warns = sum(1 for a in res.apis if a.label == "warning")
        first = res.first_flagged()
        src = str(art.path)
        yield make("compare_result_summary", run=run.name, role=run.role, step=res.step, rank=res.rank,
                   file=art.path.name, mode=res.mode, n_rows=res.n_rows, n_apis=len(res.apis),
                   n_error=errors, n_warning=warns,
                   n_unmatched=sum(1 for a in res.apis if a.unmatched),
                   n_nonfinite=sum(1 for a in res.apis if a.nonfinite),
                   first_error_api=first.api if first else None, source=src)
        step, rank = res.step or 0, res.rank or 0
        if (step, rank, exact) in placed or not res.pairs:
            continue
        placed.add((step, rank, exact))
        header = DumpHeader(task=res.mode, level="unknown", framework="unknown")
        pr = compare_pairs(SideScan(art.path, header), SideScan(art.path, header), res.pairs, exact=exact)
        cand = pr.first or pr.first_module
        loc = None
        if cand is not None:
            loc = classify_nondeterminism(cand) if exact else classify_divergence(cand, pr)
        nan = locate_first_nan(pr.run)
        for x in (loc, nan):
            if x is not None:
                x.module = res.modules.get(x.api) or parse_entry_name(x.api).module_path
                x.code_line = res.code_lines.get(x.api)
        own_dump = (run.name, step, rank) in covered
        if nan is not None and not own_dump:
            nan_by[(step, rank)] = (nan, src, None if pr.nan_twin_abnormal is None else not pr.nan_twin_abnormal)
        if loc is not None and exact:
            if not own_dump:
                yield make("nondeterministic_api", run=run.name, role=run.role, against=against,
                           against_role=against_role, step=step, rank=rank,
                           mode="md5" if pr.mode == "md5" else "exact", api=loc.api, api_name=loc.api_name,
                           family=loc.family, direction=loc.direction, kind=loc.kind, module=loc.module,
                           code_line=loc.code_line, order_index=loc.order,
                           output_rel_err=_finite(loc.output_rel_err), source=src)
        elif loc is not None:
            yield make("first_divergence", run=run.name, role=run.role, against=against,
                       against_role=against_role, step=step, rank=rank, method="msprobe_compare",
                       api=loc.api, api_name=loc.api_name, family=loc.family, direction=loc.direction,
                       kind=loc.kind, reason=loc.reason, dtype=loc.dtype, dtype_against=loc.dtype_against,
                       module=loc.module, code_line=loc.code_line, input_rel_err=loc.input_rel_err,
                       output_rel_err=loc.output_rel_err, order_index=loc.order,
                       label=loc.label if loc.label in ("error", "warning") else "warning",
                       matched_by="msprobe", after_loss=loc.after_loss, source=src)
        if own_dump:
            continue
        n_unmatched = sum(pr.run_only.values())
        yield make("dump_step_compare", run=run.name, role=run.role, against=against,
                   against_role=against_role, step=step, rank=rank,
                   mode=pr.mode if pr.mode in ("statistics", "md5", "exact") else "statistics",
                   all_match=(pr.n_diverged == 0 and pr.n_error == 0 and n_unmatched == 0 and cand is None),
                   n_compared=pr.n_compared, n_error=pr.n_error, n_warning=pr.n_warning,
                   n_diverged=pr.n_diverged, n_unmatched=n_unmatched, n_fallback=0,
                   max_output_rel_err=pr.max_out_err if pr.n_compared else None, source=src)
        names = []
        for (kind, name), count in sorted(pr.run_only.items()):
            names.append(f"run_only:{name}")
            yield make("dump_structure_diff", run=run.name, against=against, step=step, rank=rank,
                       kind=kind, name=name.split(".", 1)[1] if kind == "module" else name,
                       side="run_only", count=count, source=src)
        if names:   # golden-only APIs leave no rows: only a one-sided surplus can be told
            yield make("dump_structure_summary", run=run.name, against=against, step=step, rank=rank,
                       same_structure=False, n_run_only=len(names), n_against_only=0,
                       names=", ".join(names[:50]), source=src)
    yield from _csv_nan_facts(run, nan_by)


def _csv_nan_facts(run: RunDir, nan_by: dict) -> Iterator[Fact]:
    """First NaN of each compare result's target rows; the origin rank judged across the ranks of
    a step as for dumps (a rank whose own operator made it before a collective spread it)."""
    by_step: dict[int, list[tuple[int, Located]]] = defaultdict(list)
    for (step, rank), (loc, _src, _twin) in nan_by.items():
        by_step[step].append((rank, loc))
    for (step, rank), (loc, src, twin) in sorted(nan_by.items()):
        items = by_step[step]
        sources = [(x.order, r) for r, x in items if x.kind != "communication"]
        origin = min(sources or [(x.order, r) for r, x in items])[1]
        yield make("first_nan", run=run.name, role=run.role, step=step, rank=rank, method="msprobe_compare",
                   api=loc.api, api_name=loc.api_name, family=loc.family, direction=loc.direction,
                   kind=loc.kind, value=loc.value, module=loc.module, code_line=loc.code_line,
                   order_index=loc.order, baseline_finite=twin, origin_rank=origin,
                   is_origin_rank=(origin == rank), source=src)


def _analyses(run: RunDir, warnings: Warnings) -> Iterator[Fact]:
    placed: set[tuple[str, int]] = set()   # one fact per method and rank: the first file wins
    for art in sorted(run.files("msprobe.diff_analyze"), key=lambda a: str(a.path)):
        nodes = _guard(warnings, art.path, lambda p: analysis_json.read_analysis(p, anomaly=False)) or []
        firsts: dict[int, analysis_json.AnalysedNode] = {}
        for n in nodes:
            firsts.setdefault(n.rank, n)
        for rank, n in sorted(firsts.items()):
            if ("diff", rank) in placed:
                continue
            placed.add(("diff", rank))
            yield make("first_divergence", run=run.name, role=run.role, against="baseline",
                       against_role="baseline", step=0, rank=rank, method="diff_analyze", api=n.api,
                       api_name=n.api_name, family=n.family, direction=n.direction, kind="unknown",
                       module=n.module, code_line=n.code_line, label="error", matched_by="msprobe",
                       source=str(art.path))
    for art in sorted(run.files("msprobe.anomaly_analyze"), key=lambda a: str(a.path)):
        nodes = _guard(warnings, art.path, lambda p: analysis_json.read_analysis(p, anomaly=True)) or []
        firsts: dict[int, analysis_json.AnalysedNode] = {}
        for n in nodes:
            firsts.setdefault(n.rank, n)
        ranks = sorted(firsts)
        for rank in ranks:
            if ("nan", rank) in placed:
                continue
            placed.add(("nan", rank))
            n = firsts[rank]
            yield make("first_nan", run=run.name, role=run.role, step=0, rank=rank,
                       method="overflow_check", api=n.api, api_name=n.api_name, family=n.family,
                       direction=n.direction, kind=n.kind, module=n.module, code_line=n.code_line,
                       origin_rank=ranks[0] if len(ranks) == 1 else None,
                       is_origin_rank=True if len(ranks) == 1 else None, source=str(art.path))


def _checks(run: RunDir, warnings: Warnings) -> Iterator[Fact]:
    lines: list[config_check.CheckLine] = []
    for art in run.files("msprobe.config_check"):
        lines += _guard(warnings, art.path, config_check.read_result_workbook, warnings) or []
    for art in run.files("msprobe.ckpt_similarity"):
        lines += _guard(warnings, art.path, config_check.read_ckpt_similarity) or []
    seen = set()
    for ln in lines:
        if (ln.section, ln.item) in seen:
            continue
        seen.add((ln.section, ln.item))
        yield make("config_check_result", run=run.name, section=ln.section, item=ln.item, level=ln.level,
                   bench_value=ln.bench_value, cmp_value=ln.cmp_value)
    for art in run.files("msprobe.precheck"):
        for ln in _guard(warnings, art.path, api_checks.read_precheck) or []:
            base = api_checks.api_base(ln.api)
            yield make("api_precheck", run=run.name, api=ln.api, api_name=base, family=api_family(base),
                       forward=ln.forward, backward=ln.backward,
                       failed="error" in (ln.forward, ln.backward), message=ln.message,
                       source=str(art.path))
    for art in run.files("msprobe.free_benchmark"):
        for ln in _guard(warnings, art.path, api_checks.read_free_benchmark) or []:
            base = api_checks.api_base(ln.api)
            yield make("free_benchmark_hit", run=run.name, rank=ln.rank, step=ln.step, api=ln.api,
                       api_name=base, family=api_family(base), stage=ln.stage, pert_mode=ln.pert_mode,
                       max_rel=ln.max_rel, threshold=ln.threshold, exceeds=ln.exceeds, source=str(art.path))


def _monitor(case: Case, warnings: Warnings, dumped: set[str] | None = None) -> Iterator[Fact]:
    """Facts from the training monitor: its alerts (anomaly.json, or derived from the per-step
    CSVs when the run has no alert file), the per-parameter comparison with the baseline, and
    (for runs whose dumps were not compared) the per-step module statistics localised like a
    module-level dump: first divergence, rerun difference, first Inf/NaN."""
    dumped = dumped or set()
    tables: dict[int, dict] = {}
    for run in case.runs:
        files = [a.path for a in run.files("msprobe.monitor")]
        if files:
            tables[id(run)] = monitor.group_tables(files, warnings)
    for run in case.runs:
        alerts: list[tuple[monitor.Alert, str]] = []
        for art in run.files("msprobe.monitor_alerts"):
            alerts += [(a, str(art.path)) for a in _guard(warnings, art.path, monitor.read_alerts) or []]
        if not run.files("msprobe.monitor_alerts") and id(run) in tables:
            src = ", ".join(sorted({str(a.path.parent) for a in run.files("msprobe.monitor")}))
            alerts = [(a, src) for a in monitor.derive_alerts(tables[id(run)])]
        yield from _alert_facts(run, alerts)
    baseline = case.main("baseline")
    if baseline is not None and id(baseline) in tables:
        base_tables = tables[id(baseline)]
        for run in case.runs:
            if run is baseline or id(run) not in tables:
                continue
            files = [a.path for a in run.files("msprobe.monitor")]
            for table in sorted(set(tables[id(run)]) & set(base_tables)):
                if not (table.startswith("grad") or table.startswith("param") or table.startswith("exp_avg")):
                    continue
                res = monitor.compare_tables(tables[id(run)][table], base_tables[table], table)
                if res is None:
                    continue
                yield make("grad_monitor_compare", run=run.name, against=baseline.name, metric=res.metric,
                           n_params=res.n_params, n_steps=res.n_steps, departs=res.departs,
                           first_step=res.first_step, param=res.param, param_family=res.family,
                           ratio=res.ratio, max_ratio=res.max_ratio, common_mode=res.common_mode,
                           late_growth=res.late_growth, nonfinite_step=res.nonfinite_step,
                           source=", ".join(sorted({str(p.parent) for p in files})))
    yield from _monitor_localise(case, tables, dumped)


def _alert_facts(run: RunDir, alerts: list[tuple[monitor.Alert, str]]) -> Iterator[Fact]:
    firsts: dict[int, tuple] = {}
    for a, _src in alerts:
        if not a.benign:
            key = (a.step, a.call if a.call is not None else 1 << 62, a.tag)
            firsts[a.rank] = min(firsts.get(a.rank, key), key)
    seen: set[tuple[int, str, int]] = set()
    for a, src in alerts:
        if (a.rank, a.tag, a.step) in seen:   # anomaly.json and anomaly_analyse.json repeat records
            continue
        seen.add((a.rank, a.tag, a.step))
        first = not a.benign and firsts.get(a.rank) == (a.step, a.call if a.call is not None else 1 << 62, a.tag)
        yield make("monitor_anomaly", run=run.name, role=run.role, rank=a.rank, step=a.step,
                   rule=a.rule, tag=a.tag, target=a.target, table=a.table, value=a.value,
                   benign=a.benign, module=a.module, category=a.category, call=a.call,
                   first=first, source=src)


def _monitor_localise(case: Case, tables: dict[int, dict], dumped: set[str]) -> Iterator[Fact]:
    from precdx.collectors.msprobe import monitor_localise as ml

    steps = {rid: ml.monitor_steps(t) for rid, t in tables.items()}
    sources = {id(r): Path(", ".join(sorted({str(a.path.parent) for a in r.files("msprobe.monitor")})) or r.name)
               for r in case.runs if id(r) in tables}
    baseline = case.main("baseline")
    for run in case.runs:
        rid = id(run)
        if rid not in steps or run.name in dumped:
            continue
        src = sources[rid]
        nan = ml.first_nan(steps[rid], src)
        if nan is not None:
            step, loc = nan
            twin = None
            if baseline is not None and baseline is not run and id(baseline) in steps:
                other = next((s for s in steps[id(baseline)] if s.step == step), None)
                entry = next((e for e in other.entries if e.name.full == loc.api), None) if other else None
                if entry is not None:
                    twin = not any(t.abnormal() for t in entry.tensors())
            yield make("first_nan", run=run.name, role=run.role, step=step, rank=0, method="monitor",
                       api=loc.api, api_name=loc.api_name, family=loc.family, direction=loc.direction,
                       kind=loc.kind, value=loc.value, module=loc.module, order_index=loc.order,
                       baseline_finite=twin, origin_rank=0, is_origin_rank=True, source=str(src))
        base_role = _RERUN_OF.get(run.role)
        other = case.main(base_role) if base_role else (baseline if run.role != "baseline" else None)
        if other is None or other is run or id(other) not in steps:
            continue
        exact = base_role is not None
        found = ml.compare_monitors(steps[rid], steps[id(other)], exact=exact, source=src)
        if found is None:
            continue
        loc = found.located
        # the step before the first difference matched module for module, the step itself did not,
        # and the weights it starts from were moved apart by the update between them (beyond the
        # last-bit noise two devices leave): what a dump of those two steps would say
        pr = found.result
        if found.matched and found.matched[-1] == found.step - 1 and found.param_err > PARAMS_MOVED:
            yield make("dump_step_compare", run=run.name, role=run.role, against=other.name,
                       against_role=other.role, step=found.step - 1, rank=0,
                       mode="exact" if exact else "statistics", all_match=True, n_compared=pr.n_compared,
                       n_error=0, n_warning=0, n_diverged=0, n_unmatched=0, n_fallback=0, source=str(src))
        yield make("dump_step_compare", run=run.name, role=run.role, against=other.name,
                   against_role=other.role, step=found.step, rank=0, mode="exact" if exact else "statistics",
                   all_match=False, n_compared=pr.n_compared, n_error=pr.n_error, n_warning=pr.n_warning,
                   n_diverged=pr.n_diverged, n_unmatched=sum(pr.run_only.values()), n_fallback=0,
                   max_output_rel_err=pr.max_out_err if pr.n_compared else None, source=str(src))
        if exact:
            yield make("nondeterministic_api", run=run.name, role=run.role, against=other.name,
                       against_role=other.role, step=found.step, rank=0, mode="exact", api=loc.api,
                       api_name=loc.api_name, family=loc.family, direction=loc.direction, kind=loc.kind,
                       module=loc.module, order_index=loc.order, output_rel_err=_finite(loc.output_rel_err),
                       source=str(src))
        else:
            yield make("first_divergence", run=run.name, role=run.role, against=other.name,
                       against_role=other.role, step=found.step, rank=0, method="monitor", api=loc.api,
                       api_name=loc.api_name, family=loc.family, direction=loc.direction, kind=loc.kind,
                       reason=loc.reason, dtype=loc.dtype, dtype_against=loc.dtype_against, module=loc.module,
                       input_rel_err=loc.input_rel_err, output_rel_err=loc.output_rel_err,
                       order_index=loc.order, label=loc.label if loc.label in ("error", "warning") else "warning",
                       matched_by="name", after_loss=loc.after_loss, source=str(src))


def collect(case: Case, warnings: Warnings, *, quiet: bool = False,
            executor: Executor | None = None) -> Iterable[Fact]:
    """All msprobe facts of a case."""
    covered: set[tuple[str, int, int]] = set()
    for fact in collect_dump_facts(case, warnings, quiet=quiet, executor=executor):
        if fact.type == "dump_info":
            covered.add((fact.run, fact.step, fact.rank))
        yield fact
    yield from collect_other_facts(case, warnings, covered)

