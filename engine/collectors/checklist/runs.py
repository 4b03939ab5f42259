"""What each run is: its accelerator (from the env and pip listings, else from what its training
log prints), its framework (precdx.collectors.checklist.frameworks), and the `run` fact that
says so together with which kinds of evidence the run holds."""
from __future__ import annotations

import re
from pathlib import Path

from precdx.collectors.base import Case, RunDir
from precdx.collectors.checklist.frameworks import detect_framework
from precdx.facts import Fact
from precdx.facts.core import Run

_NPU_ENV = re.compile(rb"^(ASCEND_[A-Z_]*|HCCL_[A-Z_]*|NPU_[A-Z_]*)=", re.MULTILINE)
_GPU_ENV = re.compile(rb"^(CUDA_VISIBLE_DEVICES|NVIDIA_[A-Z_]*|CUDA_HOME|CUDA_VERSION|NCCL_[A-Z_]*)=",
                      re.MULTILINE)
_NPU_PIP = re.compile(rb"^torch[-_]npu\b", re.MULTILINE | re.IGNORECASE)
_GPU_PIP = re.compile(rb"^(nvidia-[a-z0-9-]+|torch==[^\s+]+\+cu\d+|cupy-cuda\w*)\b",
                      re.MULTILINE | re.IGNORECASE)


def guess_device(run: RunDir) -> str:
    """npu / gpu from the env listing and installed packages; unknown when nothing tells."""
    npu = gpu = 0
    for art in run.artefacts:
        if art.kind not in ("env", "pip"):
            continue
        head = _head(art.path)
        if art.kind == "env":
            npu += len(_NPU_ENV.findall(head))
            gpu += len(_GPU_ENV.findall(head))
        else:
            npu += 5 * len(_NPU_PIP.findall(head))
            gpu += len(_GPU_PIP.findall(head))
    if npu == gpu:
        return _log_device(run)
    return "npu" if npu > gpu else "gpu"


def _log_device(run: RunDir) -> str:
    """Without an env or pip listing: the accelerator the run's training log shows."""
    from precdx.collectors.logs.configecho import read_log_info  # the logs area reads logs

    for art in run.artefacts:
        if art.kind == "log" and art.detail not in ("binary", "empty"):
            device = read_log_info(art.path).device
            if device:
                return device
    return "unknown"


def _head(path: Path, size: int = 1024 * 1024) -> bytes:
    try:
        with path.open("rb") as fh:
            return fh.read(size)
    except OSError:
        return b""


def _has(run: RunDir, *prefixes: str) -> bool:
    return any(a.kind == p or a.kind.startswith(p + ".") or a.kind.startswith(p + "_")
               for a in run.artefacts for p in prefixes)


def run_facts(case: Case) -> list[Fact]:
    """One `run` fact per RunDir: role, device, framework and which kinds of evidence exist."""
    out = []
    groups_per_role: dict[str, int] = {}
    for run in case.runs:
        if run.group:
            groups_per_role[run.role] = groups_per_role.get(run.role, 0) + 1
    for run in case.runs:
        grouped = run.group is not None
        out.append(Run.of(
            role=run.role, name=run.name, device=guess_device(run),
            framework=detect_framework(run),
            has_log=_has(run, "log"),
            has_dump=_has(run, "msprobe.dump"),
            has_compare=_has(run, "msprobe.compare"),
            has_monitor=_has(run, "msprobe.monitor"),
            has_config=_has(run, "config"),
            has_env=_has(run, "env"),
            grouped=grouped, group_count=groups_per_role.get(run.role, 0) if grouped else 0,
            group=run.group, host_count=len(run.hosts),
            hosts=",".join(run.hosts) or None, artefacts=len(run.artefacts),
            source=str(run.root)))
    return out
