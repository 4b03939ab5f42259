"""Recognising tracking-tool artefacts by name and first bytes: TensorBoard event files, MLflow
metric files, W&B history (JSON lines, CSV exports, binary `.wandb` run files), plain CSV / JSON
lines holding a step column and a loss column, and the user's tag mapping YAML."""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from precdx.collectors.base import Artefact
from precdx.collectors.tracking.readers import _MLFLOW_LINE, _WANDB_COL, mlflow_run_dir
from precdx.collectors.tracking.tags import STEP_KEYS, TOP_KEY
from precdx.compression import plain_name

KIND = "log.tracking"          # a curve source (counts as a log for `run.has_log`)
TAGS_KIND = "tracking.tags"    # a user mapping of scalar names
META_KIND = "tracking.meta"    # run metadata of a tracking tool (no curve)
WANDB_MAGIC = b":W&B"
_STEPS = {k.lower() for k in STEP_KEYS}


def sniff(path: Path, head: bytes) -> Artefact | None:
    name = path.name
    if name.startswith("events.out.tfevents"):
        return Artefact(path, KIND, "tensorboard")
    if name.endswith(".wandb") and head.startswith(WANDB_MAGIC):
        return Artefact(path, KIND, "wandb-binary")
    if b"\x00" in head[:4096]:
        return None
    if "metrics" in path.parts[:-1] and _mlflow_metric(head) and mlflow_run_dir(path) is not None:
        return Artefact(path, KIND, "mlflow")
    if _mlflow_run_file(path):
        return Artefact(path, META_KIND, "mlflow")
    plain = plain_name(path).lower()
    if plain.endswith((".yaml", ".yml")):
        if f"{TOP_KEY}:".encode() in head:
            return Artefact(path, TAGS_KIND, "user mapping")
        return None
    text = head.decode("utf-8", errors="replace").lstrip("\ufeff")
    if plain.endswith((".csv", ".tsv")):
        return _sniff_csv(path, text)
    if plain.endswith((".jsonl", ".ndjson")) or (plain.endswith(".json") and text.lstrip().startswith("{")
                                                 and "\n{" in text):
        return _sniff_jsonl(path, plain, text)
    return None


def _mlflow_run_file(path: Path) -> bool:
    """The rest of an MLflow run folder (meta.yaml, params/*, tags/*): named in `inspect` as
    what they are; only the metrics carry a curve."""
    if path.name == "meta.yaml":
        return (path.parent / "metrics").is_dir()
    for parent in path.parents:
        if parent.name in ("params", "tags"):
            return (parent.parent / "meta.yaml").is_file() and (parent.parent / "metrics").is_dir()
    return False


def _mlflow_metric(head: bytes) -> bool:
    first = head.split(b"\n", 1)[0]
    return bool(first.strip()) and _MLFLOW_LINE.match(first) is not None


def _has_loss(names) -> bool:
    return any("loss" in n.lower() for n in names)


def _has_step(names) -> bool:
    return any(n.strip().lower() in _STEPS for n in names)


def _sniff_csv(path: Path, text: str) -> Artefact | None:
    first = text.split("\n", 1)[0]
    if first.startswith("vpp_stage,") or first.startswith("NPU Name,"):  # msprobe tables
        return None
    try:
        header = next(csv.reader(io.StringIO(first), delimiter="\t" if path.name.endswith(".tsv") else ","))
    except (StopIteration, csv.Error):
        return None
    header = [h.strip() for h in header]
    metrics = [(_WANDB_COL.match(h).group("metric") if _WANDB_COL.match(h) else h) for h in header]
    if not (_has_step(header) and _has_loss(metrics)):
        return None
    wandb = sum(1 for h in header if _WANDB_COL.match(h)) >= max(1, (len(header) - 1) // 2)
    return Artefact(path, KIND, "wandb-csv" if wandb else "csv")


def _sniff_jsonl(path: Path, plain: str, text: str) -> Artefact | None:
    keys: set[str] = set()
    lines = text.splitlines()[:50]
    parsed = 0
    for line in lines:
        line = line.strip()
        if not line:
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            if parsed == 0:
                return None  # the first line is not JSON: not JSON lines
            break  # a line cut by the head limit
        if not isinstance(obj, dict):
            return None
        parsed += 1
        keys.update(str(k) for k in obj)
    if not parsed or not (_has_step(keys) and _has_loss(keys)):
        return None
    if plain == "wandb-history.jsonl" or "_step" in keys and "_runtime" in keys:
        return Artefact(path, KIND, "wandb")
    return Artefact(path, KIND, "jsonl")
