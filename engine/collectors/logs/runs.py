"""From a discovered case to step series and facts: which files of a run are logs (sniffing by
content), reading them with the built-in and declared formats, choosing the curve of each run,
and pairing runs (target vs baseline, reruns, grouped runs) for the comparison facts."""
from __future__ import annotations

from pathlib import Path
from typing import Iterable

from precdx.collectors.base import Artefact, Case, RunDir
from precdx.collectors.logs import emit
from precdx.collectors.logs.formats import builtin_parsers
from precdx.collectors.logs.formats.declared import TOP_KEY, DeclaredFormat, DeclaredParser, load_declared_formats
from precdx.collectors.logs.formats.hf import read_trainer_state
from precdx.collectors.logs.model import Record
from precdx.collectors.logs.blocks import read_into
from precdx.collectors.logs.reader import ReadStats, looks_binary, parse_lines
from precdx.collectors.logs.series import SeriesBuilder, StepSeries
from precdx.compression import open_binary
from precdx.errors import PrecdxError, Warnings
from precdx.facts import Fact

LOG_SUFFIXES = {".log", ".out", ".err", ".txt", ""}
MIN_MIXED_SHARE = 0.2  # a second format with at least this share of records is "mixed formats"


def _flavour(framework: str, head: str) -> str:
    """Refine the Megatron family from file content: forks print the same iteration line."""
    if framework != "megatron":
        return framework
    low = head.lower()
    if "mindspeed" in low:
        return "mindspeed-llm"
    if "consumed tokens" in low or "deepspeed" in low:
        return "megatron-deepspeed"
    return framework


def sniff_file(path: Path, head: bytes) -> Artefact | None:
    """A training log, trainer_state.json or declared-format YAML, recognised by content."""
    if not head:
        return Artefact(path=path, kind="log", detail="empty") if path.suffix in (".log", ".out") else None
    if looks_binary(head):
        # Named like a log but binary: claim it so the user hears why it was not used.
        return Artefact(path=path, kind="log", detail="binary") if path.suffix in (".log", ".out") else None
    text = head.decode("utf-8", errors="replace")
    if path.suffix == ".json":
        if '"log_history"' in text:
            return Artefact(path=path, kind="log.trainer_state", detail="hf_trainer_state")
        return None
    if path.suffix in (".yaml", ".yml"):
        if f"{TOP_KEY}:" in text:
            return Artefact(path=path, kind="log.format", detail="declared")
        return None
    lines = text.splitlines()
    if lines and not head.endswith(b"\n"):
        lines = lines[:-1]  # the head may cut a line in half
    counts: dict[str, int] = {}
    for item in parse_lines(lines):
        if isinstance(item, Record):
            counts[item.framework] = counts.get(item.framework, 0) + 1
    if counts:
        best = max(counts, key=counts.get)
        return Artefact(path=path, kind="log", detail=_flavour(best, text))
    if path.suffix in (".log", ".out") and path.name not in ("hosts.txt",):
        return Artefact(path=path, kind="log", detail="unrecognised")
    return None


def _fallback_artefacts(run: RunDir) -> list[Artefact]:
    """Without discovery, look at the run folder itself (logs at top level, HF checkpoints)."""
    found: list[Artefact] = []
    candidates = [p for p in sorted(run.root.iterdir()) if p.is_file()] if run.root.is_dir() else []
    candidates += sorted(run.root.glob("output/checkpoint-*/trainer_state.json"))
    candidates += sorted(run.root.glob("checkpoint-*/trainer_state.json"))
    for p in candidates:
        try:
            with open(p, "rb") as fh:
                head = fh.read(64 * 1024)
        except OSError:
            continue
        art = sniff_file(p, head)
        if art is not None:
            found.append(art)
    return found


def _declared(case: Case, run: RunDir, arts: list[Artefact], warnings: Warnings) -> list[DeclaredFormat]:
    paths = [a.path for a in arts if a.kind == "log.format"]
    if case.root is not None:
        paths += [p for p in sorted(Path(case.root).glob("*.y*ml")) if p not in paths and _is_format_file(p)]
    out: list[DeclaredFormat] = []
    for p in paths:
        try:
            out.extend(load_declared_formats(p))
        except PrecdxError as exc:
            warnings.add(f"log format file ignored: {exc.message}", path=str(p), line=exc.line)
    return out


def _is_format_file(p: Path) -> bool:
    try:
        with open(p, "rb") as fh:
            return f"{TOP_KEY}:".encode() in fh.read(64 * 1024)
    except OSError:
        return False


def load_run_series(case: Case, run: RunDir, warnings: Warnings) -> StepSeries | None:
    """The step series of one run, or None (with a warning naming the files) when none parses."""
    arts = [a for a in run.artefacts if a.kind == "log" or a.kind.startswith("log.")]
    if not arts:
        arts = _fallback_artefacts(run)
    declared = _declared(case, run, arts, warnings)
    logs = [a for a in arts if a.kind == "log"]
    states = [a for a in arts if a.kind == "log.trainer_state"]
    per_file: list[tuple[Path, SeriesBuilder, ReadStats | None]] = []
    for art in logs:
        b = SeriesBuilder(run.name, run.role)
        stats = ReadStats(str(art.path))
        parsers = [DeclaredParser(f) for f in declared] + builtin_parsers()
        try:
            read_into(art.path, stats, b, parsers)
        except OSError as exc:
            warnings.add(f"cannot read log: {exc.strerror or exc}", path=str(art.path))
            continue
        _file_warnings(art.path, stats, b, warnings)
        b.sources.append(str(art.path))
        b.flavour_head = _head_text(art.path)  # type: ignore[attr-defined]
        per_file.append((art.path, b, stats))
    for art in sorted(states, key=lambda a: _checkpoint_step(a.path)):
        recs = read_trainer_state(art.path, warnings)
        if recs:
            b = SeriesBuilder(run.name, run.role)
            for r in recs:
                b.add(r)
            b.sources.append(str(art.path))
            per_file.append((art.path, b, None))
    # The richest source is the run's curve: most points, trainer_state.json winning ties
    # (exact values and steps), then the log with the most records.
    usable = [(p, b) for p, b, _ in per_file if b.primary() is not None]
    if not usable:  # no text log with a curve: a tracking tool's (TensorBoard, W&B, MLflow, CSV)
        from precdx.collectors.tracking import curve_builders
        usable = curve_builders(case, run, warnings)
    if not usable:
        return None
    path, best = max(usable, key=lambda pb: (max(pb[1].frameworks().values()),
                                             pb[1].primary() == "hf_trainer_state"))
    series = best.build()
    if series is None:
        return None
    # Events and provenance from every file of the run (a trainer_state has no events), except
    # from a second training log: two logs with iterations are two candidate curves (often two
    # jobs), so one is used alone and the user hears which, rather than a silent merge.
    rivals = _rival_logs(run, per_file, best, warnings)
    for p, b, _ in per_file:
        if b is best or b in rivals:
            continue
        for kind, n in b.event_counts.items():
            series.event_counts[kind] = series.event_counts.get(kind, 0) + n
        series.events.extend(b.events)
        if b.frameworks():
            series.sources.append(str(p))
    head = getattr(best, "flavour_head", "")
    series.framework = _flavour(series.framework, head)
    series.group, series.hosts = run.group, list(run.hosts)
    return series


def _rival_logs(run: RunDir, per_file: list, best: SeriesBuilder, warnings: Warnings) -> list[SeriesBuilder]:
    """Training logs of the run other than the one whose curve (or, under a trainer_state.json,
    whose events) is used; a warning names them and how to choose."""
    logs = [(p, b) for p, b, stats in per_file if stats is not None and b.primary() is not None]
    if len(logs) < 2:
        return []
    chosen = next(((p, b) for p, b in logs if b is best), None) or \
        max(logs, key=lambda pb: max(pb[1].frameworks().values()))
    others = [(p, b) for p, b in logs if b is not chosen[1]]
    shown = [chosen, *others][:5]
    desc = ", ".join(f"{p.name}: {max(b.frameworks().values())} iterations" for p, b in shown)
    if len(logs) > len(shown):
        desc += f", and {len(logs) - len(shown)} more"
    option = "--" + run.role.replace("_", "-")
    warnings.add(f"{len(logs)} training logs in run '{run.name}' ({desc}): using {chosen[0].name} alone (the most "
                 f"iterations), not a merge; to use another, pass that file as {option} FILE", path=str(run.root))
    return [b for _, b in others]


def _checkpoint_step(path: Path) -> int:
    try:
        return int(path.parent.name.rsplit("-", 1)[-1])
    except ValueError:
        return -1


def _head_text(path: Path) -> str:
    try:
        with open_binary(path) as fh:
            return fh.read(64 * 1024).decode("utf-8", errors="replace")
    except OSError:
        return ""


def _file_warnings(path: Path, stats: ReadStats, b: SeriesBuilder, warnings: Warnings) -> None:
    where = str(path)
    if stats.binary:
        warnings.add("binary content, not a text log; skipped", path=where)
        return
    if stats.bytes == 0:
        warnings.add("empty log file", path=where)
        return
    if b.bad_steps:
        warnings.add(f"{b.bad_steps} iteration line(s) with an impossible step number (NaN, Inf or beyond "
                     "2^53) were ignored", path=where)
    counts = b.frameworks()
    if not counts:
        warnings.add("no training-iteration lines of a known format found (declare the format in a "
                     f"'{TOP_KEY}' YAML if this is a training log)", path=where)
        return
    if stats.truncated_last_line:
        warnings.add("last line has no newline (log cut off or still being written); parsed as far as "
                     "it goes", path=where, line=stats.lines)
    if stats.cut_lines:
        warnings.add(f"{stats.cut_lines} line(s) longer than 1 MiB were cut", path=where)
    main = max(counts.values())
    # The DeepSpeed engine line rides along with client logs by design; anything else is mixed.
    others = {k: v for k, v in counts.items() if v != main and k != "deepspeed" and v >= MIN_MIXED_SHARE * main}
    if len([v for v in counts.values() if v == main]) > 1 or others:
        warnings.add("mixed log formats in one file (" + ", ".join(f"{k}: {v} lines" for k, v in
                     sorted(counts.items())) + "); using the most frequent", path=where)


def collect_case(case: Case, warnings: Warnings) -> Iterable[Fact]:
    """All log facts of a case. Never raises on bad input: problems become warnings."""
    series: dict[str, StepSeries] = {}
    for run in case.runs:
        s = load_run_series(case, run, warnings)
        if s is None:
            if run.artefacts or run.root.is_dir():
                warnings.add(f"no usable training log for run '{run.name}'", path=str(run.root))
            continue
        if len(s) == 0:
            warnings.add(f"run '{run.name}': log parsed but holds no training points", path=str(run.root))
            continue
        series[run.name] = s
    yield from facts_for(series.values(), warnings)


def _disjoint(t: StepSeries, b: StepSeries, compared: Fact, warnings: Warnings | None) -> None:
    """Two logs with training points but no step in common: said in the warnings (the verdict can
    only say that nothing was compared)."""
    if warnings is None or getattr(compared, "steps_compared", 1) or not len(t) or not len(b):
        return
    warnings.add(f"run '{t.run}' logs steps {int(t.steps[0])}-{int(t.steps[-1])} and '{b.run}' "
                 f"{int(b.steps[0])}-{int(b.steps[-1])}: no step in common, so their curves were not compared "
                 f"(log an overlapping range: rerun one side over the other's steps)", path=emit._src(t, b))


def facts_for(all_series: Iterable[StepSeries], warnings: Warnings | None = None) -> Iterable[Fact]:
    """Facts of already-built series (roles and groups taken from the series); `warnings` is told
    of two logs with no step in common."""
    runs = list(all_series)
    for s in runs:
        yield from emit.series_facts(s)
        vocab, loads = _run_info(s)
        yield emit.health_fact(s, vocab, loads)
    by_role: dict[str, list[StepSeries]] = {}
    for s in runs:
        by_role.setdefault(s.role, []).append(s)
    baseline = _main(by_role.get("baseline", []))
    baseline_rerun = _main(by_role.get("baseline_rerun", []))
    noise = None
    if baseline is not None and baseline_rerun is not None:
        from precdx.collectors.logs.compare import noise_band
        noise = noise_band(baseline_rerun, baseline)
        yield emit.rerun_fact(baseline, baseline_rerun)
    target = _main(by_role.get("target", []))
    target_rerun = _main(by_role.get("target_rerun", []))
    if target is not None and target_rerun is not None:
        yield emit.rerun_fact(target, target_rerun)
    if baseline is not None:
        for role in ("target", "target_rerun"):
            for s in by_role.get(role, []):
                for fact in emit.compare_facts(s, baseline, noise):
                    if fact.type == "loss_compare":
                        _disjoint(s, baseline, fact, warnings)
                    yield fact
                lr = emit.lr_fact(s, baseline)
                if lr is not None:
                    yield lr
    for role, members in by_role.items():
        grouped = [s for s in members if s.group]
        if len(grouped) >= 2:
            yield from emit.group_facts(grouped, baseline)


_VOCAB_KEYS = ("tokenizer_vocab_size", "vocab_size", "padded_vocab_size", "model.vocab_size")


def _run_info(s: StepSeries) -> tuple[int | None, bool | None]:
    """(vocabulary size, loads a checkpoint) as the run's logs print them."""
    from precdx.collectors.logs.configecho import read_log_info

    vocab: int | None = None
    loads: bool | None = None
    for path in s.sources:
        if path.endswith(".json"):
            continue
        info = read_log_info(path)
        for key in _VOCAB_KEYS:
            es = info.settings.get(key)
            if vocab is None and es is not None and isinstance(es.value, int) and not isinstance(es.value, bool) \
                    and es.value > 1:
                vocab = es.value
        load = info.settings.get("load") or info.settings.get("weights_file") or \
            info.settings.get("model_name_or_path")
        if load is not None:
            loads = True
        elif info.origins & {"megatron_arguments", "training_arguments"} and loads is None:
            loads = False
    if s.event_counts.get("checkpoint_load") or s.event_counts.get("checkpoint_resume"):
        loads = True
    return vocab, loads


def _main(members: list[StepSeries]) -> StepSeries | None:
    """The run representing a role: the ungrouped one, else the first group."""
    if not members:
        return None
    plain = [s for s in members if not s.group]
    return (plain or members)[0]
