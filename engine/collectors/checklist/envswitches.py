"""Determinism and numerics environment switches: their NPU/GPU spellings, defaults and
which value is the reproducible choice; per-run states (`env_switch`) and cross-run
differences (`env_diff`) with device equivalents treated as the same switch."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator

from precdx.collectors.checklist.runconfig import RunConfig
from precdx.facts import Fact
from precdx.facts.checklist import EnvDiff, EnvSwitch, UNSET

_TRUE = {"1", "true", "yes", "on", "enable", "enabled", "strict"}
_FALSE = {"0", "false", "no", "off", "disable", "disabled"}


def truthy(value: str | None) -> bool | None:
    if value is None:
        return None
    v = value.strip().lower()
    if v in _TRUE:
        return True
    if v in _FALSE or v == "":
        return False
    return None


@dataclass(frozen=True)
class Switch:
    name: str                        # canonical (NPU-side) spelling
    category: str
    device: str                      # npu | gpu | both
    gpu_name: str | None = None      # GPU spelling of a switch that exists on both devices
    default: str | None = None       # value in effect when unset; None = unknown or device-dependent
    boolean: bool = True
    # deterministic choice given the enabled state (None: the switch has no such choice)
    reproducible: Callable[[bool | None], bool | None] | None = None
    # compared between a GPU and an NPU run (allocator tuning is set per device, not a mismatch)
    cross_device: bool = True


def _on_is_det(on: bool | None) -> bool | None:
    return None if on is None else on


def _off_is_det(on: bool | None) -> bool | None:
    return None if on is None else not on


SWITCHES: tuple[Switch, ...] = (
    Switch("HCCL_DETERMINISTIC", "determinism", "both", "NCCL_DETERMINISTIC", "false", True, _on_is_det),
    Switch("LCCL_DETERMINISTIC", "determinism", "npu", None, "0", True, _on_is_det),
    Switch("CLOSE_MATMUL_K_SHIFT", "determinism", "npu", None, "0", True, _on_is_det),
    Switch("ATB_LLM_LCOC_ENABLE", "determinism", "npu", None, "1", True, _off_is_det),
    Switch("ATB_MATMUL_SHUFFLE_K_ENABLE", "determinism", "npu", None, "1", True, _off_is_det),
    Switch("CUBLAS_WORKSPACE_CONFIG", "determinism", "gpu", None, None, False, None),
    Switch("NVTE_ALLOW_NONDETERMINISTIC_ALGO", "determinism", "gpu", None, "1", True, _off_is_det),
    Switch("PYTHONHASHSEED", "determinism", "both", None, None, False, None),
    Switch("INF_NAN_MODE_ENABLE", "numerics", "npu", None, None, True, None),
    Switch("INF_NAN_MODE_FORCE_DISABLE", "numerics", "npu", None, "0", True, None),
    Switch("MS_ASCEND_CHECK_OVERFLOW_MODE", "numerics", "npu", None, None, False, None),
    Switch("NVIDIA_TF32_OVERRIDE", "numerics", "gpu", None, None, True, None),
    Switch("ASCEND_LAUNCH_BLOCKING", "synchronisation", "both", "CUDA_LAUNCH_BLOCKING", "0", True, None),
    Switch("TASK_QUEUE_ENABLE", "synchronisation", "npu", None, "1", True, None),
    Switch("CUDA_DEVICE_MAX_CONNECTIONS", "synchronisation", "both", None, None, False, None),
    Switch("HCCL_ALGO", "communication", "both", "NCCL_ALGO", None, False, None),
    Switch("HCCL_OP_EXPANSION_MODE", "communication", "npu", None, None, False, None),
    Switch("HCCL_INTRA_ROCE_ENABLE", "communication", "npu", None, None, True, None),
    Switch("HCCL_INTRA_PCIE_ENABLE", "communication", "npu", None, None, True, None),
    Switch("MULTI_STREAM_MEMORY_REUSE", "memory", "npu", None, None, True, None),
    Switch("PYTORCH_NPU_ALLOC_CONF", "memory", "both", "PYTORCH_CUDA_ALLOC_CONF", None, False, None,
           cross_device=False),
    Switch("NPU_ASD_ENABLE", "device", "npu", None, "0", True, None),
    Switch("ASCEND_RT_VISIBLE_DEVICES", "device", "both", "CUDA_VISIBLE_DEVICES", None, False, None),
)
BY_NAME = {s.name: s for s in SWITCHES}


@dataclass
class SwitchState:
    switch: Switch
    applies: bool
    is_set: bool
    value: str | None
    raw_name: str | None
    enabled: bool | None
    deterministic: bool | None

    def effective(self) -> str:
        """Comparable state: the enabled flag for boolean switches, else the value."""
        if self.switch.boolean and self.enabled is not None:
            return "on" if self.enabled else "off"
        if self.value is not None:
            return self.value
        return UNSET if self.switch.default is None else self.switch.default


def state(switch: Switch, env: dict[str, str], device: str) -> SwitchState:
    applies = switch.device == "both" or device == "unknown" or switch.device == device
    names = [switch.name]
    if switch.gpu_name:
        names = [switch.gpu_name, switch.name] if device == "gpu" else [switch.name, switch.gpu_name]
    raw_name = next((n for n in names if n in env), None)
    value = env.get(raw_name) if raw_name else None
    basis = value if value is not None else switch.default
    enabled: bool | None
    if switch.name == "CUBLAS_WORKSPACE_CONFIG":
        enabled = bool(value)
    elif switch.boolean:
        enabled = truthy(basis)
    else:
        enabled = None
    if switch.name == "INF_NAN_MODE_ENABLE" and truthy(env.get("INF_NAN_MODE_FORCE_DISABLE")):
        enabled = False  # the force switch overrides the mode switch
    if switch.name == "CUBLAS_WORKSPACE_CONFIG":
        deterministic = enabled
    elif switch.name == "PYTHONHASHSEED":
        deterministic = value is not None and value.strip().isdigit()
    else:
        deterministic = switch.reproducible(enabled) if switch.reproducible else None
    return SwitchState(switch, applies, value is not None, value, raw_name, enabled, deterministic)


def run_states(cfg: RunConfig, device: str) -> dict[str, SwitchState]:
    env = cfg.effective_env()
    return {s.name: state(s, env, device) for s in SWITCHES}


def switch_facts(cfg: RunConfig, device: str) -> Iterator[Fact]:
    if not cfg.has_env():
        return
    source = ", ".join(cfg.env_sources + cfg.export_sources) or None
    for name, st in run_states(cfg, device).items():
        yield EnvSwitch.of(role=cfg.run.role, run=cfg.run.name, name=name,
                           category=st.switch.category, device=device, applies=st.applies, is_set=st.is_set,
                           value=st.value, enabled=st.enabled, deterministic_setting=st.deterministic,
                           raw_name=st.raw_name, source=source)


def env_diffs(cfg: RunConfig, device: str, ref: RunConfig, ref_device: str, pair: str) -> Iterator[Fact]:
    if not cfg.has_env() or not ref.has_env():
        return
    mine, theirs = run_states(cfg, device), run_states(ref, ref_device)
    cross_device = device != ref_device and "unknown" not in (device, ref_device)
    source = ", ".join(cfg.env_sources + ref.env_sources) or None
    for name, switch in BY_NAME.items():
        if cross_device and (switch.device != "both" or not switch.cross_device):
            continue  # a switch that exists on one device only is expected to differ
        a, b = mine[name], theirs[name]
        if a.effective().lower() == b.effective().lower():
            continue
        yield EnvDiff.of(pair=pair, role=cfg.run.role, against_role=ref.run.role, name=name,
                         category=switch.category,
                         baseline=b.value if b.is_set else UNSET, target=a.value if a.is_set else UNSET,
                         baseline_name=b.raw_name, target_name=a.raw_name, source=source)
