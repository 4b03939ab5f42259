"""Loss and grad-norm curves of baseline vs target(s) as a PNG for reports, with the loss
divergence onset marked. matplotlib is imported lazily (Agg backend) so the collector itself
never pays for it."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from precdx.collectors.base import Case
from precdx.collectors.logs import compare as cmp
from precdx.collectors.logs.runs import load_run_series
from precdx.collectors.logs.series import StepSeries
from precdx.errors import PrecdxError, Warnings

_COLOURS = {"baseline": "#1f77b4", "baseline_rerun": "#7fb2dd", "target": "#d62728", "target_rerun": "#ff9896"}


def plot_curves(case: Case, out_path: str | Path, warnings: Warnings | None = None) -> Path | None:
    """Write the PNG; None (plus a warning) when no run has a parsable curve."""
    warnings = warnings if warnings is not None else Warnings()
    series = [s for s in (load_run_series(case, r, warnings) for r in case.runs) if s is not None and len(s)]
    if not series:
        warnings.add("no training curve to plot")
        return None
    return plot_series(series, out_path)


def plot_series(series: list[StepSeries], out_path: str | Path) -> Path:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out_path)
    with_gn = any(s.has_grad_norm for s in series)
    fig, axes = plt.subplots(2 if with_gn else 1, 1, figsize=(9, 6 if with_gn else 3.5), sharex=True,
                             squeeze=False)
    ax_loss = axes[0][0]
    for s in series:
        colour = _COLOURS.get(s.role, None)
        ax_loss.plot(s.steps, s.loss, label=s.run, color=colour, linewidth=1)
        bad = s.nonfinite
        if bad.any():
            ax_loss.scatter(s.steps[bad], np.zeros(int(bad.sum())) + np.nanmin(s.loss) if np.isfinite(s.loss).any()
                            else np.zeros(int(bad.sum())), marker="x", color=colour, label=f"{s.run} NaN")
        if with_gn:
            axes[1][0].plot(s.steps, s.grad_norm, label=s.run, color=colour, linewidth=1)
    baseline = next((s for s in series if s.role == "baseline"), None)
    target = next((s for s in series if s.role == "target"), None)
    if baseline is not None and target is not None:
        d = cmp.CurveDiff.of(target, baseline)
        onset = cmp.first_sustained(d.err, d.steps, cmp.DEFAULT_LOSS_BAND) if d.steps.size else None
        if onset is not None:
            for row in axes:
                row[0].axvline(onset, color="black", linestyle="--", linewidth=1)
            ax_loss.annotate(f"divergence onset: step {onset}", xy=(onset, 1.0), xycoords=("data", "axes fraction"),
                             xytext=(4, -12), textcoords="offset points", fontsize=8)
    ax_loss.set_ylabel("loss")
    ax_loss.legend(fontsize=7)
    if with_gn:
        axes[1][0].set_ylabel("grad norm")
        axes[1][0].set_yscale("log")
    axes[-1][0].set_xlabel("step")
    fig.tight_layout()
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(out, dpi=100)
    except OSError as exc:
        raise PrecdxError(f"cannot write plot: {exc.strerror or exc}", path=str(out)) from None
    finally:
        plt.close(fig)
    return out
