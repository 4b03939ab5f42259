"""Reading the reference curve of a watched run from anything precdx reads (a run folder, a
case folder's baseline, one log file or trainer_state.json), through the logs collector's
own step-series builder, and copying that run's text artefacts into a case folder."""
from __future__ import annotations

import math
import shutil
from dataclasses import dataclass
from pathlib import Path

from precdx.collectors.base import Case, RunDir
from precdx.errors import PrecdxError, Warnings
from precdx.watch.checks import Reference, RefPoint, Tolerances

COPY_LIMIT = 2 * 1024 ** 3  # discovery does not read larger files either


@dataclass
class LoadedReference:
    """The curve plus where it came from (the files to copy into the case)."""

    reference: Reference
    run: RunDir
    files: list[Path]
    warnings: Warnings


def _run_of(path: Path, warnings: Warnings) -> RunDir:
    from precdx import discovery
    from precdx.collectors.logs.runs import sniff_file

    if not path.exists():
        raise PrecdxError("reference run does not exist", path=str(path))
    if path.is_file():
        with open(path, "rb") as fh:
            head = fh.read(64 * 1024)
        art = sniff_file(path, head)
        if art is None or art.detail in ("empty", "binary", "unrecognised"):
            raise PrecdxError("not a training log or trainer_state.json precdx can read", path=str(path),
                              hint="give the run folder, a training log or a trainer_state.json")
        return RunDir(role="baseline", name=path.stem, root=path.parent, artefacts=[art])
    subdirs = {p.name.lower() for p in path.iterdir() if p.is_dir()}
    if "baseline" in subdirs and "target" in subdirs:
        case = discovery.discover_case(path, warnings=warnings)
        run = case.main("baseline")
    else:
        case = discovery.discover_runs(target=path, warnings=warnings)
        run = case.runs[0] if case.runs else None
    if run is None:
        raise PrecdxError("no run found", path=str(path))
    return run


def load_reference(path: str | Path, name: str = "baseline", *, exact: bool = False,
                   tol: Tolerances | None = None) -> LoadedReference:
    """The step series of ``path`` as a ``Reference``; PrecdxError when no log parses."""
    from precdx.collectors.logs.runs import load_run_series

    warnings = Warnings()
    p = Path(path)
    run = _run_of(p, warnings)
    series = load_run_series(Case(runs=[run], root=None), run, warnings)
    if series is None or len(series) == 0:
        raise PrecdxError("no training curve found in the reference", path=str(p),
                          hint="; ".join(w["message"] for w in warnings.items[:3]) or None)
    steps = series.steps.tolist()
    loss, loss_bad = series.loss.tolist(), series.loss_bad.tolist()
    gn, gn_bad = series.grad_norm.tolist(), series.gn_bad.tolist()
    lr, scale, skipped = series.lr.tolist(), series.loss_scale.tolist(), series.skipped.tolist()
    rows = []
    for i, s in enumerate(steps):
        lo = math.nan if loss_bad[i] else (None if math.isnan(loss[i]) else loss[i])
        g = math.inf if gn_bad[i] else (None if math.isnan(gn[i]) else gn[i])
        rows.append((int(s), RefPoint(loss=lo, grad_norm=g, lr=None if math.isnan(lr[i]) else lr[i],
                                      loss_scale=None if math.isnan(scale[i]) else scale[i],
                                      nonfinite=bool(loss_bad[i] or gn_bad[i]
                                                     or (not math.isnan(skipped[i]) and skipped[i] >= 1)))))
    ref = Reference.from_points(name, rows, exact=exact, windowed=series.windowed,
                                source=", ".join(series.sources) or str(p), tol=tol)
    files = [a.path for a in run.artefacts if not a.kind.startswith("msprobe")]
    return LoadedReference(ref, run, files, warnings)


def copy_run(loaded: LoadedReference, dest: Path) -> list[str]:
    """Copy the reference run's recognised text artefacts (logs, configs, scripts, listings;
    not its msprobe dumps) into ``dest``, keeping their paths inside the run. Returns what was
    copied (relative paths)."""
    root = loaded.run.root
    copied: list[str] = []
    dest.mkdir(parents=True, exist_ok=True)
    for f in loaded.files:
        try:
            rel = f.relative_to(root)
        except ValueError:
            rel = Path(f.name)
        try:
            if f.stat().st_size > COPY_LIMIT:
                continue
            out = dest / rel
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(f, out)
            copied.append(rel.as_posix())
        except OSError as exc:
            loaded.warnings.add(f"could not copy into the case: {exc.strerror or exc}", path=str(f))
    return copied
