"""Device gating of next steps: which accelerator the diagnosed run used, and whether a step
written for some devices applies to it.

A next step (rule or kb command) may say `device: [npu]` (HCCL_DETERMINISTIC, ascend-dmi,
CLOSE_MATMUL_K_SHIFT, ...) or `device: [gpu]` (CUBLAS_WORKSPACE_CONFIG, nvidia-smi, ...).
Steps address the target run, so the target's device decides. A step without the key applies
everywhere; when the device is unknown every step is kept (the text names the device).

The marker tables below say which command words belong to one device family only; the device
test (tests/rulepack/test_device_gating.py) and the command lint use them to check that every
device-specific command carries a matching `device` key.
"""
from __future__ import annotations

import re
from typing import Iterable

from precdx.facts import Fact
from precdx.vocabulary import DEVICES as KNOWN

# Words that only make sense on one device family (commands, env variables, tools, APIs).
NPU_ONLY = re.compile(
    r"\b(HCCL_[A-Z_]+|LCCL_[A-Z_]+|ASCEND_[A-Z_]+|CLOSE_MATMUL_K_SHIFT|INF_NAN_MODE_[A-Z_]+"
    r"|NPU_ASD_[A-Z_]+|ATB_[A-Z_]+|TASK_QUEUE_ENABLE|MULTI_STREAM_MEMORY_REUSE|PYTORCH_NPU_ALLOC_CONF"
    r"|ascend-dmi|hccn_tool|npu-smi|msSanitizer|mssanitizer|asys|torch_npu|npu_fusion_attention"
    r"|npu_[a-z_]+)\b")
GPU_ONLY = re.compile(
    r"\b(CUDA_[A-Z_]+|CUBLAS_[A-Z_]+|NCCL_[A-Z_]+|NVTE_[A-Z_]+|NVIDIA_TF32_OVERRIDE|nvidia-smi|dcgmi"
    r"|compute-sanitizer|torch\.backends\.cudnn|torch\.backends\.cuda|cudnn)\b")


def run_device(facts: Iterable[Fact]) -> str | None:
    """The target's device from its `run` fact (else from its env_switch facts); None if unknown."""
    fallback = None
    for f in facts:
        if getattr(f, "role", None) != "target":
            continue
        dev = getattr(f, "device", None)
        if dev not in KNOWN:
            continue
        if f.type == "run":
            return dev
        fallback = fallback or dev
    return fallback


def applies(devices: Iterable[str] | None, device: str | None) -> bool:
    """A step for `devices` (None: every device) applies to a run on `device` (None: unknown)."""
    if not devices or device is None:
        return True
    return device in devices


def device_words(text: str) -> tuple[set[str], set[str]]:
    """(NPU-only words, GPU-only words) found in a command or step text."""
    return set(NPU_ONLY.findall(text or "")), set(GPU_ONLY.findall(text or ""))
