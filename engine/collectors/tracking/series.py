"""From a run's tracking artefacts to the logs collector's step-series builder.

A run folder may hold several tracking sources: each TensorBoard folder, MLflow run, W&B run
and CSV / JSON-lines file is one source. Each is read into a `Scalars` table, its scalar names
are mapped to the series fields (tags.py), and its points become the same `Record`s a log
line gives, fed to a `SeriesBuilder` — so the comparison, facts and rules downstream are those
of text logs. When several sources carry a curve, the one with the most loss points is used
and a warning names the others (pass the file itself with --target/--baseline to choose).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np

from precdx.collectors.base import Artefact, Case, RunDir
from precdx.collectors.logs.model import Record
from precdx.collectors.logs.series import SeriesBuilder, StepSeries
from precdx.collectors.tracking import readers
from precdx.collectors.tracking.sniff import KIND, TAGS_KIND, sniff
from precdx.collectors.tracking.tags import FIELDS, PROFILES, Mapping, Profile, load_user_profile, with_fallbacks
from precdx.compression import read_head
from precdx.errors import PrecdxError, Warnings

FALLBACK_DEPTH = 4          # without discovery, how deep a run folder is searched
FALLBACK_MAX_FILES = 5000


class TrackedBuilder(SeriesBuilder):
    """A SeriesBuilder whose series says whether the tool logged interval averages (the
    framework name alone cannot: Megatron's console averages, its TensorBoard does not)."""

    def __init__(self, run: str, role: str, windowed: bool, tool: str) -> None:
        super().__init__(run, role)
        self.windowed = windowed
        self.tool = tool

    def build(self, framework: str | None = None) -> StepSeries | None:
        series = super().build(framework)
        if series is not None:
            series.windowed = self.windowed
        return series


@dataclass
class Source:
    label: str                 # the path named in facts
    scalars: readers.Scalars
    mapping: Mapping | None


def _user_profile(case: Case | None, run: RunDir, warnings: Warnings) -> Profile | None:
    paths = [a.path for a in run.artefacts if a.kind == TAGS_KIND]
    if case is not None and case.root is not None and Path(case.root).is_dir():
        for p in sorted(Path(case.root).glob("*.y*ml")):
            if p not in paths and _is_tags_file(p):
                paths.append(p)
    profile = None
    for p in paths:
        try:
            loaded = load_user_profile(p)
        except PrecdxError as exc:
            warnings.add(f"tracking tag mapping ignored: {exc.message}", path=str(p), line=exc.line)
            continue
        if profile is None:
            profile = with_fallbacks(loaded)
        else:
            warnings.add("more than one precdx_tracking_tags file; using the first", path=str(p))
    return profile


def _is_tags_file(p: Path) -> bool:
    try:
        with open(p, "rb") as fh:
            return sniff(p, fh.read(64 * 1024)) is not None
    except OSError:
        return False


def _keep(user: Profile | None):
    names: set[str] = set()
    for p in (*PROFILES, *((user,) if user else ())):
        names |= p.names()
    names |= {"epoch"}
    return names.__contains__


def _fallback(run: RunDir) -> list[Artefact]:
    """Tracking artefacts of a run folder that no discovery pass has listed (runs built by
    hand): walk the folder a few levels deep."""
    root = run.root
    if not root.is_dir():
        return []
    found: list[Artefact] = []
    seen = 0
    for dirpath, dirnames, filenames in os.walk(root):
        depth = len(Path(dirpath).relative_to(root).parts)
        dirnames[:] = [d for d in sorted(dirnames) if not d.startswith(".") and depth < FALLBACK_DEPTH]
        for f in sorted(filenames):
            seen += 1
            if seen > FALLBACK_MAX_FILES:
                return found
            p = Path(dirpath) / f
            try:
                head = read_head(p, 64 * 1024)
            except OSError:
                continue
            art = sniff(p, head)
            if art is not None:
                found.append(art)
    return found


def read_sources(case: Case | None, run: RunDir, warnings: Warnings) -> list[Source]:
    """Every tracking source of a run, read and mapped (sources without a loss scalar are kept
    with mapping None, so the caller can say why they were not used)."""
    arts = [a for a in run.artefacts if a.kind in (KIND, TAGS_KIND)]
    if not run.artefacts:
        arts = _fallback(run)
    curves = [a for a in arts if a.kind == KIND]
    if not curves:
        return []
    user = _user_profile(case, run, warnings)
    keep = _keep(user)
    tb_dirs: dict[Path, list[Path]] = {}
    mlflow_runs: dict[Path, list[Path]] = {}
    wandb_bin: list[Path] = []
    tables: list[tuple[Path, str]] = []
    for a in curves:
        if a.detail == "tensorboard":
            tb_dirs.setdefault(a.path.parent, []).append(a.path)
        elif a.detail == "mlflow":
            rd = readers.mlflow_run_dir(a.path)
            if rd is not None:
                mlflow_runs.setdefault(rd, []).append(a.path)
        elif a.detail == "wandb-binary":
            wandb_bin.append(a.path)
        else:
            tables.append((a.path, a.detail))
    scalars: list[readers.Scalars] = []
    for d, files in sorted(tb_dirs.items()):
        scalars.append(readers.read_tensorboard(files, keep, str(d)))
    for rd, files in sorted(mlflow_runs.items()):
        scalars.append(readers.read_mlflow(rd, files, keep))
    history_dirs = {p.parent.parent for p, detail in tables if detail == "wandb"}
    for p, detail in sorted(tables):
        if detail in ("csv", "wandb-csv"):
            prefer = [n for f in FIELDS for n in getattr(user, f)] if user else []
            scalars.append(readers.read_csv(p, keep, prefer))
        else:
            scalars.append(readers.read_jsonl(p, keep, "wandb" if detail == "wandb" else "jsonl"))
    for p in sorted(wandb_bin):
        if p.parent in history_dirs:
            continue  # the same W&B run's history is already read from its JSON lines
        scalars.append(readers.read_wandb_binary(p, keep))
    out = []
    for s in scalars:
        for path, msg, line in s.problems:
            warnings.add(msg, path=path, line=line)
        out.append(Source(s.source, s, Mapping.for_names(s.present, user)))
    return out


def to_records(src: Source) -> Iterator[Record]:
    """The points of a mapped source as Records in writing order (train points along the
    loss scalar, other fields looked up at the same step, the last value logged for a step
    winning; evaluation points as eval records). Streamed: the builder folds long runs."""
    s, m = src.scalars, src.mapping
    assert m is not None
    loss_name = m.names["loss"]
    keys = np.frombuffer(s.cols[loss_name][0], dtype=np.int64) if s.count(loss_name) else np.zeros(0, np.int64)
    loss = np.frombuffer(s.cols[loss_name][1], dtype=np.float64) if keys.size else np.zeros(0)
    step_of = None
    if s.by_row:
        step_name = next((n for n in m.profile.step if s.count(n)), None)
        if step_name is None:
            return
        step_of = _lookup(s, step_name)
    fields = {f: _lookup(s, n) for f, n in m.names.items() if f not in ("loss", "eval_loss")}
    steps = keys if step_of is None else step_of(keys)
    values = {f: fn(keys) for f, fn in fields.items()}
    fw = m.profile.framework
    for i in range(keys.size):
        step = steps[i]
        if step != step:  # NaN: a table row without a step
            continue
        rec = Record(line=i + 1, framework=fw, step=int(step), loss=float(loss[i]))
        for f, arr in values.items():
            v = arr[i]
            if v == v:
                if f == "skipped":
                    rec.skipped = int(v) if np.isfinite(v) else None
                else:
                    setattr(rec, f, float(v))
        yield rec
    if "eval_loss" in m.names:
        name = m.names["eval_loss"]
        ek = np.frombuffer(s.cols[name][0], dtype=np.int64)
        ev = np.frombuffer(s.cols[name][1], dtype=np.float64)
        es = ek if step_of is None else step_of(ek)
        for i in range(ek.size):
            if es[i] == es[i]:
                yield Record(line=i + 1, framework=fw, kind="eval", step=int(es[i]), loss=float(ev[i]))


def _lookup(s: readers.Scalars, name: str):
    """key array -> value array (NaN where the scalar was not logged at that key; the last
    value logged at a key wins)."""
    if not s.count(name):
        return lambda keys: np.full(keys.size, np.nan)
    k = np.frombuffer(s.cols[name][0], dtype=np.int64)
    v = np.frombuffer(s.cols[name][1], dtype=np.float64)
    rev_k = k[::-1]
    uniq, first = np.unique(rev_k, return_index=True)
    vals = v[::-1][first]

    def get(keys: np.ndarray) -> np.ndarray:
        if uniq.size == 0:
            return np.full(keys.size, np.nan)
        idx = np.clip(np.searchsorted(uniq, keys), 0, uniq.size - 1)
        return np.where(uniq[idx] == keys, vals[idx], np.nan)
    return get


def curve_builders(case: Case | None, run: RunDir, warnings: Warnings) -> list[tuple[Path, SeriesBuilder]]:
    """The builder of the run's tracking curve ([] when the run has none): the source with the
    most loss points, a warning naming the others when there are several."""
    sources = read_sources(case, run, warnings)
    built: list[tuple[Source, TrackedBuilder, int]] = []
    for src in sources:
        if src.mapping is None:
            if src.scalars.present:
                shown = ", ".join(sorted(src.scalars.present)[:8])
                warnings.add(f"{src.scalars.tool}: no training-loss scalar among {len(src.scalars.present)} "
                             f"({shown}{', ...' if len(src.scalars.present) > 8 else ''}); name it in a "
                             "precdx_tracking_tags file", path=src.label)
            continue
        b = TrackedBuilder(run.name, run.role, src.mapping.profile.windowed, src.scalars.tool)
        n = 0
        for r in to_records(src):
            n += r.kind == "train"
            b.add(r)
        src.scalars.cols.clear()  # the builder holds the curve now
        if n == 0:
            warnings.add(f"{src.scalars.tool}: scalar '{src.mapping.names['loss']}' holds no training points "
                         "with a step", path=src.label)
            continue
        b.sources.append(src.label)
        built.append((src, b, n))
    if not built:
        return []
    built.sort(key=lambda t: -t[2])
    src, best, n = built[0]
    if len(built) > 1:
        others = ", ".join(f"{s.label} ({k} points)" for s, _, k in built[1:])
        warnings.add(f"{len(built)} tracking curves in run '{run.name}': using {src.label} ({n} points); "
                     f"not used: {others}. Pass the one you mean with --target/--baseline FILE or folder",
                     path=str(run.root))
    return [(Path(src.label), best)]
