"""Whether a run was set up to be reproducible: seed, deterministic algorithms, deterministic
communication and matmul order, dropout (from its config, scripts and environment)."""
from __future__ import annotations

import re

from precdx.collectors.checklist.envswitches import run_states, truthy
from precdx.collectors.checklist.runconfig import RunConfig
from precdx.facts import Fact
from precdx.facts.checklist import DeterminismStatus

# Frameworks whose seed has a fixed default when none is given (Megatron 1234, HF Trainer 42).
_FIXED_DEFAULT_SEED = {"megatron", "mindspeed", "megatron_deepspeed", "hf_trainer"}
# Frameworks whose hidden/attention dropout default is not 0 (Megatron: 0.1).
_DROPOUT_DEFAULT_ON = {"megatron", "mindspeed", "megatron_deepspeed"}
_DROPOUT_KEYS = ("hidden_dropout", "attention_dropout", "embedding_dropout")
_DET_API = re.compile(r"use_deterministic_algorithms\(\s*True|seed_all\([^)]*mode\s*=\s*True")
# msprobe seed_all(...) (pytorch/reproducibility/random_reproducibility.py) sets, inside the
# process and whatever `mode` says: on NPU HCCL_DETERMINISTIC=True, LCCL_DETERMINISTIC=1,
# CLOSE_MATMUL_K_SHIFT=1, ATB_LLM_LCOC_ENABLE=0; on GPU cudnn.deterministic and
# CUBLAS_WORKSPACE_CONFIG=:4096:8. An env listing never shows these, so the call counts itself.
_SEED_ALL = re.compile(r"\bseed_all\(([^)]*)\)")


def status_fact(cfg: RunConfig, device: str) -> Fact | None:
    if not cfg.has_any_config and not cfg.has_env():
        return None
    seed = cfg.value("seed")
    if seed is None:
        seed_fixed = cfg.framework in _FIXED_DEFAULT_SEED
    else:
        seed_fixed = bool(re.fullmatch(r"-?\d+", seed.strip()))
    det_algo = truthy(cfg.value("deterministic_mode")) is True or bool(_DET_API.search(cfg.scripts_text))
    states = run_states(cfg, device)
    if device == "gpu":
        comm = states["HCCL_ALGO"].is_set or states["HCCL_DETERMINISTIC"].enabled is True
        matmul = states["CUBLAS_WORKSPACE_CONFIG"].enabled is True
    elif device == "npu":
        comm = states["HCCL_DETERMINISTIC"].enabled is True
        matmul = states["CLOSE_MATMUL_K_SHIFT"].enabled is True
    else:
        comm = states["HCCL_DETERMINISTIC"].enabled is True or states["HCCL_ALGO"].is_set
        matmul = (states["CLOSE_MATMUL_K_SHIFT"].enabled is True
                  or states["CUBLAS_WORKSPACE_CONFIG"].enabled is True)
    dropout_off = _dropout_off(cfg)
    seed_all = _SEED_ALL.search(cfg.scripts_text or "")
    if seed_all is not None and device in ("npu", "gpu"):
        comm = comm or device == "npu"   # HCCL/LCCL determinism; GPU NCCL is left as it was
        matmul = True
        seed_fixed = True
        if re.search(r"rm_dropout\s*=\s*True", seed_all.group(1)):
            dropout_off = True
    sources = sorted({s.source for s in cfg.settings.values() if s.source != "derived"} | set(cfg.env_sources))
    return DeterminismStatus.of(role=cfg.run.role, run=cfg.run.name, seed=seed, seed_fixed=seed_fixed,
                                deterministic_algorithms=det_algo, comm_deterministic=comm,
                                matmul_deterministic=matmul, dropout_off=dropout_off,
                                fully_deterministic=seed_fixed and det_algo and comm and matmul
                                and dropout_off is True,
                                source=", ".join(sources) or None)


def _dropout_off(cfg: RunConfig) -> bool | None:
    values = {k: cfg.value(k) for k in _DROPOUT_KEYS}
    numbers = []
    for v in values.values():
        if v is None:
            continue
        try:
            numbers.append(float(v))
        except ValueError:
            return None
    if any(n > 0 for n in numbers):
        return False
    if cfg.framework in _DROPOUT_DEFAULT_ON and (values["hidden_dropout"] is None
                                                or values["attention_dropout"] is None):
        return False
    if not numbers:
        return None
    return True
