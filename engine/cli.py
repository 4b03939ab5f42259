"""precdx command line: diagnose run pairs, show facts, explain rules and failure modes, lint
and audit the rule pack, run the demo lab, serve the HTTP API, consult interactively."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click

# precdx does no linear algebra, but numpy's OpenBLAS starts a thread per core at import that
# spins for a while waiting for work: 130 ms of CPU per process on 2 cores, taken from the log
# reader's scan threads and the dump readers' pool. One thread is enough (a value the user set is
# kept; worker processes inherit it).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from precdx import __version__  # noqa: E402
from precdx.errors import PrecdxError, Warnings  # noqa: E402
from precdx.vocabulary import ENGINES, LANGS, REPORT_FORMATS  # noqa: E402

FORMATS = REPORT_FORMATS


class _Group(click.Group):
    """Turns PrecdxError (and OS errors on the user's files) into one clear line on stderr and
    exit 2 (3 for internal limits), never a traceback; with `--format json` stdout also gets
    the error as a JSON object: {"error": {"message", "path", "line", "hint", "exit_code"}}.
    Exit 1 stays reserved for `--fail-on` and failed lint/tests/audit gates."""

    def invoke(self, ctx: click.Context):
        as_json = _wants_json(ctx)
        try:
            return super().invoke(ctx)
        except PrecdxError as exc:
            _fatal(exc, as_json)
        except OSError as exc:  # a file that vanished or cannot be read/written: bad input, not a bug
            _fatal(PrecdxError(exc.strerror or str(exc), path=exc.filename), as_json)
        except click.ClickException as exc:
            if not as_json:
                raise
            _fatal(PrecdxError(exc.format_message(), exit_code=exc.exit_code), as_json)
        except KeyboardInterrupt:
            click.echo("precdx: interrupted", err=True)
            sys.exit(130)


def _wants_json(ctx: click.Context) -> bool:
    """`--format json` (or `--format=json`) among the sub-command's arguments."""
    args = list(getattr(ctx, "_protected_args", None) or []) + list(ctx.args or [])
    for i, a in enumerate(args):
        if a == "--format=json" or (a == "--format" and i + 1 < len(args) and args[i + 1] == "json"):
            return True
    return False


def _fatal(exc: PrecdxError, as_json: bool):
    if as_json:
        err = {"message": exc.message, "path": exc.path, "line": exc.line, "hint": exc.hint,
               "exit_code": exc.exit_code}
        click.echo(json.dumps({"error": err}, ensure_ascii=False))
    click.echo(f"precdx: error: {exc.render()}", err=True)
    sys.exit(exc.exit_code)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="precdx")
def main() -> None:
    """precdx — diagnose accuracy (精度) problems in large-model training."""


# ------------------------------------------------------------------ shared input options
def _inputs(f):
    f = click.option("--facts", "facts_files", multiple=True, type=click.Path(dir_okay=False),
                     help="Facts as YAML/JSON (repeatable); combined with collected facts.")(f)
    f = click.option("--baseline-rerun", "baseline_reruns", multiple=True, type=click.Path(),
                     help="A rerun of the baseline job, folder or log file (repeatable).")(f)
    f = click.option("--target-rerun", "target_reruns", multiple=True, type=click.Path(),
                     help="A rerun of the target job, folder or log file (repeatable).")(f)
    f = click.option("--baseline", type=click.Path(),
                     help="Baseline run: its folder, or one training log / tracking file (e.g. the GPU run).")(f)
    f = click.option("--target", type=click.Path(),
                     help="Target run: its folder, or one training log / tracking file (e.g. the NPU run).")(f)
    f = click.argument("case_dir", required=False, type=click.Path(file_okay=False))(f)
    return f


def _gather(case_dir, target, baseline, target_reruns, baseline_reruns, facts_files, warnings: Warnings):
    """The facts of a run pair, a case folder and/or --facts files (precdx.api.gather)."""
    from precdx.api import gather

    _check_inputs(case_dir, target, baseline, facts_files)
    return gather(case_dir, target=target, baseline=baseline, target_reruns=target_reruns,
                  baseline_reruns=baseline_reruns, facts=_fact_files(facts_files), warnings=warnings).facts


def _check_inputs(case_dir, target, baseline, facts_files) -> None:
    if baseline and not target and not case_dir:
        raise PrecdxError("--baseline needs --target")
    if not (case_dir or target or baseline or facts_files):
        raise PrecdxError("nothing to diagnose: give a case folder, --target/--baseline, or --facts FILE")


def _fact_files(facts_files):
    """The facts of --facts files, read when the facts are gathered (after the runs')."""
    if facts_files:
        from precdx.facts import load_fact_files
        yield from load_fact_files(facts_files)


_TUNED = False


def tune_allocator() -> bool:
    """Tune glibc's allocator for a command that reads a big input once: blocks of a log (4 MB),
    the arrays made from them and the buffers of a run's points are taken from the heap again
    after they are freed (mmap threshold 32 MiB, trim threshold 128 MiB) instead of from fresh
    pages the kernel must fault in and zero (3.5x fewer page faults; a 100 MB log read 6-11%
    sooner on 2 cores, for 8-15 MB more peak memory in bench/memory). Process-wide and kept: only
    one-shot commands call it (not `serve`). True when applied (glibc); elsewhere nothing is done."""
    global _TUNED
    if _TUNED:
        return True
    import ctypes
    import platform

    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    try:
        libc = ctypes.CDLL(None)
        _TUNED = libc.mallopt(-3, 32 << 20) == 1 and libc.mallopt(-1, 128 << 20) == 1  # M_MMAP_/M_TRIM_THRESHOLD
    except (OSError, AttributeError):
        return False
    return _TUNED


# The cyclic collector's pace while a one-shot command runs (see _one_shot).
ONE_SHOT_GC = (200_000, 20, 20)


def _one_shot(command):
    """For a command that reads a case once and exits. Such a call allocates a few hundred
    thousand objects that mostly live to its end (modules, models, facts), and the cyclic
    collector's default pace (a pass every 700 allocations, over everything now and then, and
    once more over everything at exit) costs 50-100 ms of a 0.6 s call. While the command runs,
    collect every 200,000 allocations instead (still collecting, so memory stays bounded on huge
    inputs; mypy does the same); when it ends, freeze what it made (gc.freeze: no pass over it
    after the command, nor at interpreter exit). An in-process caller's next command unfreezes
    it again, so its garbage is collected in the end there too. The allocator is tuned for one
    big read (tune_allocator)."""
    import functools

    @functools.wraps(command)
    def run(*args, **kwargs):
        import gc

        global _froze
        if _froze:
            gc.unfreeze()
            _froze = False
        tune_allocator()
        before = gc.get_threshold()
        gc.set_threshold(*ONE_SHOT_GC)
        try:
            return command(*args, **kwargs)
        finally:
            gc.freeze()
            _froze = True
            gc.set_threshold(*before)
    run.one_shot = True
    return run


_froze = False


class _time_budget:
    """SIGALRM-based wall-clock budget for one CLI diagnosis (main thread only)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def _expired(self, signum, frame):
        raise PrecdxError(f"time budget of {self.seconds:g} s exceeded", exit_code=3,
                          hint="raise --time-budget, or give fewer/smaller artefacts")

    def __enter__(self):
        import signal
        import threading
        self.active = self.seconds > 0 and threading.current_thread() is threading.main_thread() \
            and hasattr(signal, "setitimer")
        if self.active:
            self.previous = signal.signal(signal.SIGALRM, self._expired)
            signal.setitimer(signal.ITIMER_REAL, self.seconds)
        return self

    def __exit__(self, *exc):
        if self.active:
            import signal
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self.previous)
        return False


def _check_out(out: str | None) -> None:
    """Refuse an output path that cannot be written before any work is done."""
    if not out:
        return
    path = Path(out)
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise PrecdxError("cannot write the report: its folder does not exist", path=out,
                          hint=f"create {folder}/ first")
    if path.is_dir():
        raise PrecdxError("cannot write the report: this is a folder", path=out, hint="give a file name")


def _emit(text: str, out: str | None) -> None:
    if out:
        _check_out(out)
        try:
            Path(out).write_text(text, encoding="utf-8")
        except OSError as exc:
            raise PrecdxError(f"cannot write the report: {exc.strerror or exc}", path=out) from None
        click.echo(f"wrote {out}", err=True)
    else:
        click.echo(text, nl=not text.endswith("\n"))


# ------------------------------------------------------------------ diagnose
@main.command()
@_inputs
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True)
@click.option("--out", "-o", type=click.Path(dir_okay=False), help="Write the report to a file.")
@click.option("--engine", type=click.Choice(ENGINES), default="durable", show_default=True,
              help="Rule matcher back end.")
@click.option("--lang", type=click.Choice(LANGS), default="en", show_default=True)
@click.option("--rules", "rules_path", type=click.Path(exists=True), help="Use another rule pack folder.")
@click.option("--verbose", "-v", is_flag=True, help="Show every evidence value, step and near miss.")
@click.option("--fail-on", type=click.Choice(["never", "misaligned", "inconclusive"]), default="never",
              help="Exit 1 when the verdict is this bad (for CI gates).")
@click.option("--time-budget", type=float, default=600.0, show_default=True,
              help="Give up (exit 3) when collecting and diagnosing take longer than this many seconds.")
@click.option("--changed", "changed", multiple=True, metavar="KEY",
              help="A difference you made on purpose (repeatable; also `changed: [...]` in CASE_DIR/case.yaml): "
                   "ranked as the trigger, with the mechanisms that depend on it, not as the cause.")
@click.option("--max-length", type=click.IntRange(min=300), default=None, metavar="N",
              help="Cap a chat reply (text, markdown, slack: characters; lark: bytes of the JSON), cut at "
                   "hypothesis boundaries. Defaults: slack 12000, lark 20000, text and markdown uncapped.")
@click.option("--report-url", default=None, metavar="URL",
              help="End a chat reply (text, markdown, slack, lark) with a link to the full report at URL "
                   "(e.g. where you publish the --format html output).")
@_one_shot
def diagnose(case_dir, target, baseline, target_reruns, baseline_reruns, facts_files, fmt, out, engine, lang,
             rules_path, verbose, fail_on, time_budget, changed, max_length, report_url):
    """Diagnose a case folder (baseline/, target/, target_rerun/ ...), a single run folder (checked
    on its own against what a healthy run looks like), a --target/--baseline pair (--target alone
    works too), or facts given with --facts."""
    from precdx import progress
    from precdx.api import diagnose_case

    progress.set_quiet(fmt in ("json", "slack", "lark") or out is not None and fmt != "text")
    _check_out(out)
    if (max_length or report_url) and fmt not in ("text", "markdown", "slack", "lark"):
        raise PrecdxError(f"--max-length and --report-url shape a chat reply; --format {fmt} is not one",
                          hint="use --format text, markdown, slack or lark")
    warnings = Warnings()
    with _time_budget(time_budget):
        _check_inputs(case_dir, target, baseline, facts_files)
        result = diagnose_case(case_dir, target=target, baseline=baseline, target_reruns=target_reruns,
                               baseline_reruns=baseline_reruns, facts=_fact_files(facts_files), changed=changed,
                               engine=engine, lang=lang, rules_path=rules_path, warnings=warnings,
                               series=fmt == "html")
    diag = result.diagnosis
    _emit(_render_result(result, fmt, engine=engine, rules_path=rules_path, verbose=verbose,
                         max_length=max_length, report_url=report_url), out)
    if fail_on == "misaligned" and diag.verdict == "misaligned":
        sys.exit(1)
    if fail_on == "inconclusive" and diag.verdict != "aligned":
        sys.exit(1)


def _render_result(result, fmt: str, *, engine: str = "durable", rules_path: str | None = None,
                   verbose: bool = False, max_length: int | None = None, report_url: str | None = None) -> str:
    """A CaseDiagnosis in a report format; a Lark post also gets the other language's text
    (the same facts diagnosed again in that language)."""
    from precdx.render import CHAT_FORMATS, render

    diag = result.diagnosis
    kw: dict = {}
    if fmt == "html":
        kw["series"] = result.series
    if fmt == "text":
        kw["verbose"] = verbose
    if fmt in CHAT_FORMATS:
        kw.update(max_length=max_length, report_url=report_url)
    if fmt == "lark":
        from precdx.diagnosis import diagnose as diagnose_facts
        from precdx.vocabulary import LANGS

        kw["translations"] = [diagnose_facts(result.facts, engine=engine, lang=other, rules_path=rules_path,
                                             warnings=_carried(diag.warnings)) for other in LANGS if other != diag.lang]
    return render(diag, fmt, **kw)


def _carried(items) -> Warnings:
    """A Warnings holding the collection warnings of a diagnosis (for its translation)."""
    out = Warnings()
    out.items = [dict(w) for w in items]
    return out


# ------------------------------------------------------------------ facts
@main.command()
@_inputs
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--vocabulary", is_flag=True, help="Print the fact vocabulary instead (types, fields, units).")
@_one_shot
def facts(case_dir, target, baseline, target_reruns, baseline_reruns, facts_files, fmt, vocabulary):
    """Print the facts the matcher would see (or, with --vocabulary, every fact type)."""
    from precdx import progress
    from precdx.facts.describe import vocabulary_json, vocabulary_text

    progress.set_quiet(fmt == "json")
    if vocabulary:
        _emit(json.dumps(vocabulary_json(), indent=2) if fmt == "json" else vocabulary_text(), None)
        return
    warnings = Warnings()
    fs = _gather(case_dir, target, baseline, target_reruns, baseline_reruns, facts_files, warnings)
    if fmt == "json":
        _emit(json.dumps({"facts": fs.to_json(), "warnings": warnings.items}, indent=2), None)
        return
    lines = []
    for f in fs:
        data = f.to_json()
        ftype = data.pop("type")
        src = data.pop("source", None)
        body = ", ".join(f"{k}={v}" for k, v in data.items())
        lines.append(f"{ftype}: {body}" + (f"    [{src}]" if src else ""))
    for w in warnings:
        lines.append(f"warning: {w.get('path', '')}{':' + str(w['line']) if w.get('line') else ''} {w['message']}")
    _emit("\n".join(lines) + "\n", None)


# ------------------------------------------------------------------ inspect
@main.command()
@click.argument("case_dir", type=click.Path())
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@_one_shot
def inspect(case_dir, fmt):
    """List what was recognised in a case or run folder (or one file), as what, and what was
    ignored and why."""
    from precdx.inspection import inspect_folder, render_inspect_text

    report = inspect_folder(case_dir)
    _emit(json.dumps(report, indent=2, default=str) if fmt == "json" else render_inspect_text(report), None)


# ------------------------------------------------------------------ schema / explain
@main.command()
def schema():
    """Print the JSON Schema of `diagnose --format json` output."""
    from precdx.diagnosis import Diagnosis

    click.echo(json.dumps(Diagnosis.model_json_schema(), indent=2))


@main.command()
@click.argument("name")
@click.option("--lang", type=click.Choice(LANGS), default="en", show_default=True)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def explain(name, lang, fmt):
    """Explain a rule (by id) or a failure mode (by id): what it means, what fires it, what to do."""
    from precdx.explain import explain as do_explain

    _emit(do_explain(name, lang=lang, fmt=fmt), None)


# ------------------------------------------------------------------ rules
@main.group()
def rules():
    """List, lint and test the rule pack."""


@rules.command("list")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--rules", "rules_path", type=click.Path(exists=True))
def rules_list(fmt, rules_path):
    """One line per rule: id, status, failure modes, title."""
    from precdx.diagnosis import load_pack

    pack = load_pack(rules_path)
    rows = [{"id": r.id, "name": r.rule.name, "status": r.rule.status, "stage": r.rule.stage,
             "failure_modes": r.rule.failure_modes, "against": r.rule.against, "symptom": r.rule.symptom,
             "title": r.rule.title.en, "path": r.path} for r in pack.rules]
    if fmt == "json":
        _emit(json.dumps(rows, indent=2), None)
        return
    for row in rows:
        target = row["symptom"] and f"symptom:{row['symptom']}" or ",".join(row["failure_modes"]) or \
            "against:" + ",".join(row["against"])
        click.echo(f"{row['id']:<9} {row['status']:<12} {target:<45} {row['title']}")


@rules.command("lint")
@click.option("--rules", "rules_path", type=click.Path(exists=True))
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def rules_lint(rules_path, fmt):
    """Check schema, references, quality and logic of the rule pack; exit 1 on errors."""
    from precdx.rulepack.lint import lint, render_lint

    issues = lint(rules_path)
    _emit(json.dumps([i.as_dict() for i in issues], indent=2) if fmt == "json" else render_lint(issues), None)
    if any(i.severity == "error" for i in issues):
        sys.exit(1)


@rules.command("test")
@click.option("--rules", "rules_path", type=click.Path(exists=True))
@click.option("--engine", type=click.Choice(ENGINES), default="python", show_default=True)
@click.option("-k", "select", help="Only cases whose rule id contains this text.")
def rules_test(rules_path, engine, select):
    """Run the rule test cases (rules/**/*.test.yaml); exit 1 on any failure or zero cases."""
    from precdx.rulerunner import run_rule_tests

    results = run_rule_tests(rules_path, engine=engine, select=select)
    failed = [r for r in results if not r.passed]
    for r in failed:
        click.echo(f"FAIL {r.case_id}: {r.message}")
    click.echo(f"{len(results) - len(failed)} passed, {len(failed)} failed")
    if failed or not results:
        sys.exit(1)


# ------------------------------------------------------------------ audit
@main.command()
@click.option("--format", "fmt", type=click.Choice(["text", "json", "markdown"]), default="text", show_default=True)
@click.option("--fail-under", type=float, default=None, help="Exit 1 when canonical coverage (%) is below this.")
@click.option("--rules", "rules_path", type=click.Path(exists=True))
@click.option("--fail-unread/--no-fail-unread", default=True, show_default=True,
              help="Exit 1 when a collected fact type is read by no rule (outside the reviewed "
                   "descriptive list).")
def audit(fmt, fail_under, rules_path, fail_unread):
    """Coverage: failure modes x rules x tests x collectors able to supply the facts."""
    from precdx.audit import audit_failures, build_audit, render_audit

    report = build_audit(rules_path)
    _emit(json.dumps(report, indent=2) if fmt == "json" else render_audit(report, fmt), None)
    failed = False
    if fail_under is not None and report["coverage_percent"] < fail_under:
        click.echo(f"coverage {report['coverage_percent']:.1f}% is under {fail_under}%", err=True)
        failed = True
    if fail_unread:
        for problem in audit_failures(report):
            click.echo(problem, err=True)
            failed = True
    if failed:
        sys.exit(1)


# ------------------------------------------------------------------ demo
@main.command()
@click.option("--fault", default=None, help="Fault to inject (see --list).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default="precdx-demo", show_default=True)
@click.option("--list", "list_faults", is_flag=True, help="List the fault catalogue.")
@click.option("--steps", type=int, default=None, help="Training steps per run.")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True)
@click.option("--lang", type=click.Choice(LANGS), default="en", show_default=True)
@click.option("--watch", "watch_run", is_flag=True,
              help="Train the target under precdx watch: catch the breach live, capture and replay that "
                   "step, then diagnose the captured case.")
def demo(fault, out_dir, list_faults, steps, fmt, lang, watch_run):
    """Train a tiny GPT twice on the CPU (baseline and a faulty target), write real artefacts,
    and diagnose them."""
    if list_faults:
        from precdx.demo.catalogue import FAULTS  # no torch needed to list
        if fmt == "json":
            _emit(json.dumps([{"fault": f.name, "failure_mode": f.failure_mode, "description": f.description,
                               "runs": list(f.runs)} for f in FAULTS.values()], indent=2), None)
        else:
            _emit(_fault_table(FAULTS.values()), None)
        return
    try:
        from precdx import demo as lab
    except ImportError as exc:  # torch missing
        raise PrecdxError(f"the demo needs torch: {exc}", hint="pip install torch==2.13.0") from None
    fault = fault or lab.DEFAULT_FAULT
    if fault not in lab.FAULTS:
        raise PrecdxError(f"unknown fault {fault!r}", hint="choose from " + ", ".join(lab.FAULTS))
    from precdx import progress
    from precdx.api import diagnose_case

    progress.set_quiet(fmt in ("json", "slack", "lark"))
    kw = {"steps": steps} if steps else {}
    if watch_run:
        case_dir = _demo_watch(fault, Path(out_dir), kw, quiet=fmt == "json")
    else:
        click.echo(f"precdx demo: training baseline and target with fault '{fault}' ...", err=True)
        case_dir = lab.run_demo(fault, Path(out_dir), **kw)
    click.echo(f"precdx demo: artefacts written to {case_dir}; diagnosing ...", err=True)
    result = diagnose_case(case_dir, lang=lang, series=fmt == "html")
    _emit(_render_result(result, fmt), None)


def _fault_table(faults) -> str:
    """fault | failure mode | runs | description, the description wrapped to the terminal."""
    import shutil
    import textwrap

    faults = list(faults)
    w1 = max(len("fault"), *(len(f.name) for f in faults))
    w2 = max(len("failure mode"), *(len(f.failure_mode) for f in faults))
    runs = {f.name: ",".join(r for r in f.runs if r not in ("baseline", "target")) or "-" for f in faults}
    w3 = max(len("extra runs"), *(len(r) for r in runs.values()))
    indent = w1 + w2 + w3 + 6
    width = max(40, shutil.get_terminal_size((120, 24)).columns - indent)
    lines = [f"{'fault':<{w1}}  {'failure mode':<{w2}}  {'extra runs':<{w3}}  description",
             f"{'-' * w1}  {'-' * w2}  {'-' * w3}  {'-' * min(width, 40)}"]
    for f in faults:
        wrapped = textwrap.wrap(f.description, width) or [""]
        lines.append(f"{f.name:<{w1}}  {f.failure_mode:<{w2}}  {runs[f.name]:<{w3}}  {wrapped[0]}")
        lines.extend(" " * indent + more for more in wrapped[1:])
    return "\n".join(lines) + "\n"


def _demo_watch(fault: str, out_dir: Path, kw: dict, quiet: bool) -> Path:
    """demo --watch: baseline job, target under the watcher, replay of the captured step."""
    from precdx.demo.watching import run_watch_case
    from precdx.watch import load_status

    click.echo(f"precdx demo --watch: training the baseline, then the target with fault '{fault}' under "
               "precdx watch ...", err=True)
    case_dir = run_watch_case(fault, out_dir, quiet=quiet, **kw)
    status = load_status(case_dir)
    breach = status.get("breach")
    if breach:
        click.echo(f"precdx demo --watch: breach at step {breach['step']} ({breach['check']}); captured "
                   + (", ".join(f"iteration {c['iteration']}" for c in status.get("captured", [])) or "nothing")
                   + f"; replayed on the reference side. Case: {case_dir}", err=True)
    else:
        click.echo(f"precdx demo --watch: no breach; case: {case_dir}", err=True)
    return case_dir


# ------------------------------------------------------------------ replay
@main.command()
@click.argument("case_dir", type=click.Path(file_okay=False))
@click.option("--step", type=int, default=None,
              help="Captured iteration to replay (as logged, 1-based); default: the first captured.")
@click.option("--model-fn", "model_fn", required=True, metavar="MODULE:FUNCTION",
              help="function() -> model or (model, optimizer), built as the reference side builds them.")
@click.option("--step-fn", "step_fn", default=None, metavar="MODULE:FUNCTION",
              help="function(model, optimizer, batch): the step's forward and backward "
                   "[default: call the model on the batch, backpropagate the loss it returns].")
@click.option("--batch-fn", "batch_fn", default=None, metavar="MODULE:FUNCTION",
              help="function(iteration, saved_batch) -> the batch the reference side reads at that iteration "
                   "[default: the watched run's batch].")
@click.option("--checkpoint", type=click.Path(dir_okay=False, exists=True), default=None,
              help="State dict to load instead of the captured one (large models).")
@click.option("--side", type=click.Choice(["baseline", "target"]), default=None,
              help="Folder to write the replay into [default: the reference side recorded in watch.json].")
@click.option("--diagnose", "then_diagnose", is_flag=True, help="Diagnose the case afterwards.")
def replay(case_dir, step, model_fn, step_fn, batch_fn, checkpoint, side, then_diagnose):
    """Re-run a step captured by precdx watch on the reference side with the probe on, so both
    sides of that step are in the case (watch.json says which steps were captured)."""
    try:
        from precdx.watch.replayer import replay as run_replay
    except ImportError as exc:  # torch missing
        raise PrecdxError(f"replay needs torch: {exc}", hint="pip install torch") from None
    dump = run_replay(case_dir, step, model_fn=model_fn, step_fn=step_fn, batch_fn=batch_fn,
                      checkpoint=checkpoint, side=side, quiet=True)
    click.echo(f"precdx replay: wrote {dump}", err=True)
    if then_diagnose:
        from precdx.api import diagnose_case
        from precdx.render import render

        _emit(render(diagnose_case(case_dir).diagnosis, "text"), None)


# ------------------------------------------------------------------ serve / ask (optional parts)
def _serve_epilog() -> str:
    import textwrap

    from precdx.service.settings import environment

    lines = ["\b", "Environment variables the server reads (defaults in brackets):"]
    for name, meaning, default in environment():
        text = meaning + (f" [{default}]" if default else "")
        wrapped = textwrap.wrap(text, width=66) or [""]
        lines.append(f"  {name:<27} {wrapped[0]}")
        lines.extend(f"  {'':<27} {more}" for more in wrapped[1:])
    lines += ["", "Error codes and the operator's checklist: the README's service section."]
    return "\n".join(lines)


@main.command(epilog=_serve_epilog())
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on. Anything but loopback needs a token (or --insecure).")
@click.option("--port", default=8787, show_default=True, type=int)
@click.option("--workers", default=2, show_default=True, type=int)
@click.option("--db", "db_url", default=None, help="Session store URL (sqlite:///path or postgresql://...); "
              "default PRECDX_DB_URL.")
@click.option("--token-file", type=click.Path(dir_okay=False), default=None,
              help="Read the bearer token from this file (one line). Or set PRECDX_TOKEN / PRECDX_TOKEN_FILE.")
@click.option("--token", default=None,
              help="Require this bearer token. Visible to every user in `ps`: prefer --token-file or PRECDX_TOKEN.")
@click.option("--insecure", is_flag=True, help="Listen on a non-loopback address without a token anyway.")
def serve(host, port, workers, db_url, token_file, token, insecure):
    """Run the HTTP API (chat bots, sessions).

    Without a token the server only listens on a loopback address; give one with PRECDX_TOKEN,
    PRECDX_TOKEN_FILE or --token-file to serve other hosts. Limits (body size and read time,
    facts, sessions, rate per client) are set by the variables below."""
    try:
        from precdx.service.app import serve as run_server
    except ImportError as exc:
        raise PrecdxError(f"the service needs its extras: {exc}", hint="pip install 'precdx[serve]'") from None
    run_server(host=host, port=port, workers=workers, db_url=db_url, token=token, token_file=token_file,
               insecure=insecure)


@main.command("mcp")
def mcp_server():
    """Serve the engine to AI assistants over the Model Context Protocol (stdio): tools to
    diagnose a case or facts, explain, list failure modes and plan the next evidence; the
    knowledge base as resources."""
    try:
        from precdx.mcp.server import main as run_mcp
        import mcp  # noqa: F401
    except ImportError as exc:
        raise PrecdxError(f"the MCP server needs its extra: {exc}", hint="pip install 'precdx[mcp]'") from None
    run_mcp()


@main.command()
@_inputs
@click.option("--lang", type=click.Choice(LANGS), default="en", show_default=True)
@click.option("--max-questions", type=int, default=12, show_default=True)
def ask(case_dir, target, baseline, target_reruns, baseline_reruns, facts_files, lang, max_questions):
    """Interactive consultation: answer the engine's questions (yes/no/number/skip) one at a time."""
    from precdx.planner.consult import consult

    warnings = Warnings()
    if case_dir or target or facts_files:
        facts = _gather(case_dir, target, baseline, target_reruns, baseline_reruns, facts_files, warnings)
    else:
        from precdx.facts import FactSet
        facts = FactSet()
    consult(facts, lang=lang, max_questions=max_questions, warnings=warnings)


if __name__ == "__main__":
    main()
