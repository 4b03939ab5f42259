"""Recognising msprobe artefacts by their first bytes (file names are only hints)."""
from __future__ import annotations

import re
from pathlib import Path

from precdx.collectors.base import Artefact

_LEVEL = re.compile(rb'"level"\s*:\s*"([^"]*)"')
_TASK = re.compile(rb'"task"\s*:\s*"([^"]*)"')
_RANK_DIR = re.compile(r"^(rank|proc)_?\d+$")


def _first_line(head: bytes) -> bytes:
    return head.lstrip(b"\xef\xbb\xbf").split(b"\n", 1)[0].strip()


def sniff(path: Path, head: bytes) -> Artefact | None:
    """The msprobe artefact kind of one file, or None."""
    body = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    name = path.name.lower()
    if body.startswith(b"{"):
        return _sniff_json(path, name, body)
    if name == "dump.json" and _RANK_DIR.match(path.parent.name):
        return Artefact(path, "msprobe.dump", "unknown/unknown")  # damaged: reported by collect
    if body.startswith(b"PK\x03\x04") and name.endswith(".xlsx"):
        if name.startswith("compare_result"):
            return Artefact(path, "msprobe.compare_result", "xlsx")
        if name == "result.xlsx":
            return Artefact(path, "msprobe.config_check", "xlsx")
        return None
    line = _first_line(body)
    if line.startswith(b"NPU Name,"):
        mode = ("md5" if b"NPU MD5" in line else "legacy" if b"Accuracy Reached" in line
                else "tensor" if b"Cosine" in line and b"EucDist" in line else "statistics")
        return Artefact(path, "msprobe.compare_result", mode)
    if line.startswith((b"vpp_stage,name,step", b"vpp_stage,step,module_name")):
        table = re.sub(r"_(step)?\d+-\d+\.csv$", "", name)
        return Artefact(path, "msprobe.monitor", table)
    low = line.lower()
    if b"forward test success" in low or (b"api name" in low and "api_precision_compare_result" in name):
        return Artefact(path, "msprobe.precheck", "result")
    if b"pert_mode" in low and b"api_name" in low and b"max_rel" in low:
        return Artefact(path, "msprobe.free_benchmark", "csv")
    return None


def _sniff_json(path: Path, name: str, body: bytes) -> Artefact | None:
    if (b'"task"' in body or b'"level"' in body) and b'"data"' in body:
        level = _LEVEL.search(body)
        task = _TASK.search(body)
        lv = level.group(1).decode("utf-8", "replace") if level else "unknown"
        tk = task.group(1).decode("utf-8", "replace") if task else "unknown"
        kind = "msprobe.debug" if lv == "debug" else "msprobe.dump"
        return Artefact(path, kind, f"{tk}/{lv}")
    if name == "dump.json" and _RANK_DIR.match(path.parent.name):
        # an empty or damaged dump in a dump folder: recognised so the user hears about it
        return Artefact(path, "msprobe.dump", "unknown/unknown")
    sibling_dump = (path.parent / "dump.json").is_file()
    if name == "stack.json" and sibling_dump:
        return Artefact(path, "msprobe.stack", "")
    if name == "construct.json" and sibling_dump:
        return Artefact(path, "msprobe.construct", "")
    if b'"op_name"' in body and b'"rank' in body[:200]:
        if b'"input_args"' in body or b'"construct_info"' in body or name.startswith("anomaly_analyze"):
            return Artefact(path, "msprobe.anomaly_analyze", "overflow_check")
        return Artefact(path, "msprobe.diff_analyze", "compare -da")
    if b'"tag_name"' in body and b"Rule " in body:
        return Artefact(path, "msprobe.monitor_alerts", "anomaly")
    if b'"cos"' in body and b'"l2"' in body and b'"numel"' in body:
        return Artefact(path, "msprobe.ckpt_similarity", "config_check")
    return None
