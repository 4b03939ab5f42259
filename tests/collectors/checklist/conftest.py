"""Helpers for the checklist tests: build run folders from text in tmp_path, discover them
with the real discovery, and run the checklist collector."""
from __future__ import annotations

from pathlib import Path

import pytest

from precdx.collectors.base import Case
from precdx.collectors.checklist import COLLECTOR
from precdx.discovery import discover_case
from precdx.errors import Warnings
from precdx.facts import Fact

GPU_ENV = "CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7\nCUDA_HOME=/usr/local/cuda\nNCCL_DEBUG=WARN\nHOME=/root\n"
NPU_ENV = ("ASCEND_RT_VISIBLE_DEVICES=0,1,2,3,4,5,6,7\nASCEND_HOME_PATH=/usr/local/Ascend/ascend-toolkit/latest\n"
           "HCCL_CONNECT_TIMEOUT=1200\nHOME=/home/ma-user\n")
GPU_PIP = "torch==2.1.0+cu121\nnvidia-cublas-cu12==12.4.5.8\nnumpy==1.26.4\n"
NPU_PIP = "torch==2.1.0\ntorch-npu==2.1.0.post10\nnumpy==1.26.4\n"


def write_case(root: Path, runs: dict[str, dict[str, str | bytes]]) -> Path:
    """runs: folder -> {relative file path: content}."""
    for folder, files in runs.items():
        for rel, content in files.items():
            path = root / folder / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content)
    return root


def collect_dir(root: Path) -> tuple[list[Fact], Warnings, Case]:
    warnings = Warnings()
    case = discover_case(root, warnings=warnings)
    facts = list(COLLECTOR.collect(case, warnings))
    return facts, warnings, case


def of(facts: list[Fact], ftype: str, **where) -> list[Fact]:
    return [f for f in facts if f.type == ftype and all(getattr(f, k) == v for k, v in where.items())]


def one(facts: list[Fact], ftype: str, **where) -> Fact:
    found = of(facts, ftype, **where)
    assert len(found) == 1, f"expected one {ftype} {where}, got {found}"
    return found[0]


@pytest.fixture
def make_case(tmp_path):
    def build(runs: dict[str, dict[str, str | bytes]]):
        return collect_dir(write_case(tmp_path / "case", runs))
    return build
