"""msprobe's own localisation outputs: `diff_analyze_*.json` (compare -da: first differing API
per rank) and `anomaly_analyze_*.json` (overflow_check: first Inf/NaN node per rank)."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from precdx.collectors.msprobe.context import user_frame
from precdx.collectors.msprobe.jsonstream import load_small_json
from precdx.collectors.msprobe.naming import api_family, module_path_of, parse_entry_name
from precdx.errors import PrecdxError

_RANK_KEY = re.compile(r"^rank_?(\d+)$")


@dataclass
class AnalysedNode:
    """One node msprobe reported for one rank."""

    rank: int
    api: str
    api_name: str
    family: str
    direction: str
    kind: str
    module: str | None
    code_line: str | None


def _stats_abnormal(v: Any) -> bool:
    if isinstance(v, dict):
        for k in ("Max", "Min", "NPU max", "NPU min"):
            x = v.get(k)
            if isinstance(x, float) and not math.isfinite(x):
                return True
        return any(_stats_abnormal(x) for x in v.values() if isinstance(x, (dict, list)))
    if isinstance(v, list):
        return any(_stats_abnormal(x) for x in v)
    return False


def _module(construct_info: Any) -> str | None:
    if isinstance(construct_info, list):
        for node in reversed(construct_info):
            if isinstance(node, str):
                path = module_path_of(node)
                if path:
                    return path
    return None


def read_analysis(path: Path, *, anomaly: bool) -> list[AnalysedNode]:
    """Nodes per rank, in the file's order. `anomaly`: an overflow_check output."""
    data = load_small_json(path, what="msprobe analysis json")
    if not isinstance(data, dict) or not all(isinstance(v, list) for v in data.values()):
        raise PrecdxError("expected {\"rank_N\": [nodes]} as msprobe writes it", path=str(path))
    out: list[AnalysedNode] = []
    for key, nodes in data.items():
        m = _RANK_KEY.match(str(key))
        rank = int(m.group(1)) if m else 0
        for node in nodes:
            if not isinstance(node, dict) or not isinstance(node.get("op_name"), str):
                continue
            name = parse_entry_name(node["op_name"])
            info = node.get("data_info") if isinstance(node.get("data_info"), dict) else {}
            family = api_family(name.base)
            if anomaly:
                inputs = [info.get(k) for k in ("input_args", "input_kwargs", "input")]
                bad_in = _stats_abnormal(inputs)
                if not bad_in:
                    kind = "communication" if family == "communication" else "operator_output"
                else:
                    kind = "input"
            else:
                kind = "unknown"
            stack = node.get("stack_info")
            out.append(AnalysedNode(
                rank=rank, api=node["op_name"], api_name=name.base, family=family,
                direction=name.direction if name.direction in ("forward", "backward", "parameters_grad") else "forward",
                kind=kind, module=_module(node.get("construct_info")) or name.module_path,
                code_line=user_frame(stack) if isinstance(stack, list) else None))
    return out
