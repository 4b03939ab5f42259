"""Downstream evaluation results (HF `eval.json`-style flat metrics, lm-evaluation-harness
`results` tables) and the metric gaps between runs."""
from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Iterator

from precdx.collectors.base import RunDir
from precdx.errors import Warnings
from precdx.facts import Fact
from precdx.facts.checklist import EvalGap

MAX_EVAL_BYTES = 16 * 1024 * 1024
# bookkeeping numbers that describe the evaluation run, not the model
_META = re.compile(r"(^|_)(epoch|step|global_step|runtime|samples_per_second|steps_per_second|"
                   r"samples|total_flos|n_samples|num_samples|stderr|alias|version)s?$|_stderr")
_LOWER_BETTER = re.compile(r"loss|perplexity|(^|_)ppl|(^|_)wer|(^|_)cer|error|bpb|bits_per|nll")
_HIGHER_BETTER = re.compile(r"acc|f1|bleu|rouge|exact_match|(^|_)em$|score|pass@|mmlu|precision|"
                            r"recall|auc|win_rate")


def read_metrics(path: Path, warnings: Warnings) -> dict[str, float] | None:
    try:
        data = json.loads(path.read_bytes()[:MAX_EVAL_BYTES].decode("utf-8"))
    except OSError as exc:
        warnings.add(f"cannot read evaluation file: {exc.strerror or exc}", path=str(path))
        return None
    except UnicodeDecodeError:
        warnings.add("evaluation file is not UTF-8 text", path=str(path))
        return None
    except json.JSONDecodeError as exc:
        warnings.add(f"evaluation file is not valid JSON ({exc.msg}); its metrics are not compared",
                     path=str(path), line=exc.lineno)
        return None
    except (ValueError, RecursionError) as exc:  # 5000-digit integers, [[[[ nesting
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc).splitlines()[0][:120]
        warnings.add(f"evaluation file is not valid JSON ({reason}); its metrics are not compared",
                     path=str(path))
        return None
    if not isinstance(data, dict):
        warnings.add("evaluation file is not a JSON object of metrics", path=str(path))
        return None
    out: dict[str, float] = {}
    results = data.get("results")
    if isinstance(results, dict):
        for task, metrics in results.items():
            if isinstance(metrics, dict):
                for name, value in metrics.items():
                    _add(out, f"{task}.{name.split(',', 1)[0]}", value)
    for name, value in data.items():
        if name != "results":
            _add(out, name, value)
    if not out:
        warnings.add("evaluation file holds no numeric metrics; nothing to compare", path=str(path))
        return None
    return out


def _add(out: dict[str, float], name: str, value: object) -> None:
    if _META.search(name.lower()):
        return
    if isinstance(value, bool):
        return
    if isinstance(value, (int, float)):
        try:
            out[name] = float(value)
        except OverflowError:  # an integer beyond float range
            out[name] = math.inf if value > 0 else -math.inf
    elif isinstance(value, str) and value.strip().lower() in ("nan", "inf", "-inf", "+inf"):
        out[name] = float(value.strip().lower())


def direction(metric: str) -> bool | None:
    """True when higher is better, False when lower is better, None when unknown."""
    low = metric.lower().rsplit(".", 1)[-1]
    if _LOWER_BETTER.search(low):
        return False
    if _HIGHER_BETTER.search(low):
        return True
    return None


def run_metrics(run: RunDir, warnings: Warnings) -> tuple[dict[str, float] | None, str | None]:
    merged: dict[str, float] | None = None
    sources = []
    for art in run.files("eval"):
        metrics = read_metrics(art.path, warnings)
        if metrics is not None:
            merged = {**(merged or {}), **metrics}
            sources.append(str(art.path))
    return merged, ", ".join(sources) or None


def eval_gaps(run: RunDir, mine: dict[str, float], ref: RunDir, theirs: dict[str, float],
              pair: str, source: str | None) -> Iterator[Fact]:
    for metric in sorted(set(mine) & set(theirs)):
        t, b = mine[metric], theirs[metric]
        gap = t - b
        if math.isnan(gap):
            rel = math.nan
        elif b != 0:
            rel = gap / abs(b)
        else:
            rel = 0.0 if gap == 0 else math.copysign(math.inf, gap)
        up = direction(metric)
        worse = None
        if up is not None and not math.isnan(gap):
            worse = gap < 0 if up else gap > 0
        elif up is not None:
            worse = math.isnan(t) and not math.isnan(b)
        yield EvalGap.of(pair=pair, role=run.role, against_role=ref.role, metric=metric,
                         baseline=b, target=t, abs_gap=gap, rel_gap=rel, higher_is_better=up,
                         target_worse=worse, source=source)
