"""The torch side of a capture: recording one training step with the probe (from the model's
first forward to the end of its last backward, so live capture and replay cover the same
calls), and saving / restoring what a replay needs: weights and optimizer state, the batch,
every RNG state, and the determinism settings in force."""
from __future__ import annotations

import json
import os
import platform
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch

from precdx.errors import PrecdxError
from precdx.probe.recorder import Probe

MODEL_INPUTS = "__precdx_model_inputs__"


# ----------------------------------------------------------------------------- batches
@dataclass
class ModelInputs:
    """What the model's forward received (``model(*args, **kwargs)``): the batch a replay feeds
    when the loop did not hand its own batch to the watcher."""

    args: tuple = ()
    kwargs: dict = field(default_factory=dict)

    def call(self, model: torch.nn.Module) -> Any:
        return model(*self.args, **self.kwargs)


def to_cpu(obj: Any) -> Any:
    """Detached CPU copies of every tensor in a nested batch; mappings become dicts (an HF
    BatchEncoding too). Raises TypeError for objects a weights-only load could not read back."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().to("cpu", copy=True)
    if isinstance(obj, ModelInputs):
        return {MODEL_INPUTS: True, "args": [to_cpu(a) for a in obj.args],
                "kwargs": {str(k): to_cpu(v) for k, v in obj.kwargs.items()}}
    if isinstance(obj, Mapping):
        return {str(k): to_cpu(v) for k, v in obj.items()}
    if isinstance(obj, tuple):
        return tuple(to_cpu(v) for v in obj)
    if isinstance(obj, list):
        return [to_cpu(v) for v in obj]
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    raise TypeError(f"cannot save a batch element of type {type(obj).__name__}")


def from_saved(obj: Any, device: torch.device | str | None = None) -> Any:
    """Inverse of ``to_cpu`` (tensors moved to ``device`` when given)."""
    if isinstance(obj, torch.Tensor):
        return obj.to(device) if device is not None else obj
    if isinstance(obj, dict):
        if obj.get(MODEL_INPUTS) is True:
            return ModelInputs(tuple(from_saved(a, device) for a in obj["args"]),
                               {k: from_saved(v, device) for k, v in obj["kwargs"].items()})
        return {k: from_saved(v, device) for k, v in obj.items()}
    if isinstance(obj, tuple):
        return tuple(from_saved(v, device) for v in obj)
    if isinstance(obj, list):
        return [from_saved(v, device) for v in obj]
    return obj


def load_saved(path: Path) -> Any:
    """torch.load restricted to tensors and plain containers (a case folder can come from
    anyone: nothing in it may run code)."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise PrecdxError("file missing from the case", path=str(path)) from None
    except Exception as exc:  # torch raises UnpicklingError, RuntimeError, EOFError ...
        raise PrecdxError(f"cannot read: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}",
                          path=str(path)) from None


# ----------------------------------------------------------------------------- RNG / state
def rng_state() -> dict[str, Any]:
    """Every RNG a training step may draw from (torch CPU and accelerator, Python, numpy)."""
    state: dict[str, Any] = {"torch": torch.get_rng_state(), "python": _py_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    try:
        import numpy as np
        kind, keys, pos, has_gauss, gauss = np.random.get_state()
        state["numpy"] = [kind, torch.from_numpy(keys.copy()), int(pos), int(has_gauss), float(gauss)]
    except ImportError:
        pass
    return state


def _py_state() -> list:
    version, internal, gauss = random.getstate()
    return [version, list(internal), gauss]


def set_rng_state(state: Mapping[str, Any]) -> None:
    if "torch" in state:
        torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    if "python" in state:
        version, internal, gauss = state["python"]
        random.setstate((version, tuple(internal), gauss))
    if "numpy" in state:
        import numpy as np
        kind, keys, pos, has_gauss, gauss = state["numpy"]
        np.random.set_state((kind, keys.numpy(), pos, has_gauss, gauss))


def state_bytes(model: torch.nn.Module, optimizer: Any | None) -> int:
    total = sum(t.numel() * t.element_size() for t in model.state_dict().values() if isinstance(t, torch.Tensor))
    if optimizer is not None and hasattr(optimizer, "state"):
        for st in optimizer.state.values():
            total += sum(t.numel() * t.element_size() for t in st.values() if isinstance(t, torch.Tensor))
    return total


def snapshot(model: torch.nn.Module, optimizer: Any | None) -> dict[str, Any]:
    """CPU copies of the model's and the optimizer's state (what a replay loads)."""
    out: dict[str, Any] = {"model": to_cpu(dict(model.state_dict()))}
    if optimizer is not None and hasattr(optimizer, "state_dict"):
        try:
            out["optimizer"] = to_cpu(optimizer.state_dict())
        except TypeError:
            pass  # an optimizer whose state holds non-tensor objects: weights are what matter
    return out


def determinism_state() -> dict[str, Any]:
    """The determinism switches in force (key names kept apart from training-config keys so
    the checklist collector does not mistake this file for the run's config)."""
    names = ("CUBLAS_WORKSPACE_CONFIG", "HCCL_DETERMINISTIC", "CLOSE_MATMUL_K_SHIFT", "PYTHONHASHSEED",
             "NCCL_ALGO", "HCCL_ALGO", "ASCEND_LAUNCH_BLOCKING", "CUDA_LAUNCH_BLOCKING")
    info: dict[str, Any] = {
        "torch_initial_seed": int(torch.initial_seed()),
        "torch_deterministic_algorithms": bool(torch.are_deterministic_algorithms_enabled()),
        "torch_deterministic_warn_only": bool(torch.is_deterministic_algorithms_warn_only_enabled()),
        "cudnn_deterministic": bool(torch.backends.cudnn.deterministic),
        "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
        "matmul_allow_tf32": bool(torch.backends.cuda.matmul.allow_tf32),
        "cudnn_allow_tf32": bool(torch.backends.cudnn.allow_tf32),
        "torch_version": torch.__version__, "python": platform.python_version(),
        "env": {k: os.environ[k] for k in names if k in os.environ},
    }
    return info


# ----------------------------------------------------------------------------- environment
_ENV_PREFIXES = ("ASCEND_", "HCCL_", "NCCL_", "CUDA_", "CUBLAS_", "CUDNN_", "PYTORCH_", "TORCH_", "NVIDIA_",
                 "NPU_", "ACL_", "TASK_QUEUE", "INF_NAN", "CLOSE_MATMUL", "MS_", "OMP_", "MKL_", "HF_",
                 "TRANSFORMERS_", "ACCELERATE_", "DEEPSPEED_", "MEGATRON_", "LD_PRELOAD")
_ENV_SECRET = ("TOKEN", "KEY", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH")


def env_listing() -> str:
    """Accuracy-relevant environment variables as NAME=value lines (never anything that looks
    like a credential)."""
    lines = []
    for k in sorted(os.environ):
        if not k.startswith(_ENV_PREFIXES) and k not in ("PYTHONHASHSEED",):
            continue
        if any(s in k.upper() for s in _ENV_SECRET):
            continue
        lines.append(f"{k}={os.environ[k]}")
    return "\n".join(lines) + ("\n" if lines else "")


def pip_listing() -> str:
    from importlib import metadata
    seen: dict[str, str] = {}
    for dist in metadata.distributions():
        name = dist.metadata.get("Name")
        if name and name.lower() not in seen:
            seen[name.lower()] = f"{name}=={dist.version}"
    return "".join(f"{line}\n" for _, line in sorted(seen.items()))


# ----------------------------------------------------------------------------- recording
class StepRecorder:
    """Records one training step with the probe, the same way on the live run and in a replay.

    Recording starts at the root module's first forward of the step (``on_forward``), pauses
    when a backward pass through the model's output ends, resumes on the next forward (gradient
    accumulation) and ends with ``finish``: the optimizer update, clipping and data loading are
    outside the dump on both sides.
    """

    def __init__(self, model: torch.nn.Module, dump_root: Path | None, step_index: int, *,
                 summary_mode: str = "statistics", level: str = "mix", rank: int = 0) -> None:
        self.model = model
        self.probe = Probe(model, dump_root, level=level, summary_mode=summary_mode, steps=None, rank=rank)
        self.probe.current_step = step_index
        self.step_index = step_index
        self.started = False
        self.finished = False
        self._handles: list[Any] = []

    def install(self) -> "StepRecorder":
        self._handles.append(self.model.register_forward_pre_hook(self._pre, with_kwargs=True))
        self._handles.append(self.model.register_forward_hook(self._post))
        return self

    def _pre(self, module, args, kwargs):
        if module.training:  # evaluation forwards are not part of the training step
            self.on_forward()
        return None

    def on_forward(self) -> None:
        if self.finished:
            return
        if not self.started:
            self.started = True
            self.probe.start()
        else:
            self.probe.resume()

    def _post(self, module, args, output):
        if not self.started or self.finished:
            return None
        for t in _tensors(output):
            if t.requires_grad:
                t.register_hook(self._on_output_grad)
                break
        return None

    def _on_output_grad(self, grad):
        # runs inside backward: pause once this whole backward pass has finished
        torch.autograd.Variable._execution_engine.queue_callback(self.probe.pause)
        return None

    def finish(self) -> Path | None:
        """End the recording; returns the dump folder (None if the step never ran forward)."""
        if self.finished:
            return None
        self.finished = True
        for h in self._handles:
            h.remove()
        self._handles.clear()
        if not self.started:
            return None
        record = self.probe.stop()
        if record is None or self.probe.dump_path is None:
            return None
        return self.probe.step_dir(record.step)

    def config(self) -> dict[str, Any]:
        cfg = self.probe.config()
        cfg["step"] = [self.step_index]
        return cfg


_MASKING = ("masked_fill", "masked_fill_", "where", "triu", "tril", "full", "full_like", "fill_")


def nonfinite_entries(data: Mapping[str, Any]) -> list[str]:
    """Entries of a recorded step whose output statistics are NaN/Inf (masking ops, which write
    -inf on purpose, left out)."""
    found = []
    for name, entry in data.items():
        parts = name.split(".")
        if len(parts) > 1 and parts[1] in _MASKING:
            continue
        out = entry.get("output") if isinstance(entry, dict) else None
        if out is None and isinstance(entry, dict) and "input_args" not in entry and "input" not in entry:
            out = entry  # parameters_grad: only produced values
        if _stats_nonfinite(out):
            found.append(name)
    return found


def _stats_nonfinite(obj: Any, depth: int = 0) -> bool:
    if depth > 8:
        return False
    if isinstance(obj, dict):
        if obj.get("type") == "torch.Tensor":
            return any(isinstance(obj.get(k), float) and not (obj[k] == obj[k] and abs(obj[k]) != float("inf"))
                       for k in ("Max", "Min", "Norm"))
        return any(_stats_nonfinite(v, depth + 1) for v in obj.values())
    if isinstance(obj, list):
        return any(_stats_nonfinite(v, depth + 1) for v in obj)
    return False


def _tensors(obj: Any, depth: int = 0) -> list[torch.Tensor]:
    if depth > 4:
        return []
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, Mapping):
        return [t for v in obj.values() for t in _tensors(v, depth + 1)]
    if isinstance(obj, (list, tuple)):
        return [t for v in obj for t in _tensors(v, depth + 1)]
    if hasattr(obj, "to_tuple"):  # transformers ModelOutput
        return _tensors(obj.to_tuple(), depth + 1)
    return []


def loss_of(output: Any) -> torch.Tensor | None:
    """The scalar loss in a model output: a 0-d tensor, ``.loss`` or ``["loss"]``."""
    if isinstance(output, torch.Tensor):
        return output if output.numel() == 1 else None
    loss = getattr(output, "loss", None)
    if loss is None and isinstance(output, Mapping):
        loss = output.get("loss")
    if loss is None and isinstance(output, (tuple, list)) and output and isinstance(output[0], torch.Tensor) \
            and output[0].numel() == 1:
        loss = output[0]
    return loss if isinstance(loss, torch.Tensor) else None


def default_step(model: torch.nn.Module, optimizer: Any, batch: Any) -> Any:
    """Forward (and backward when the model returns a loss): the step a replay runs when the
    user gives no step function. ``batch`` is ModelInputs, a dict of keyword inputs, or a tuple
    of positional inputs."""
    if isinstance(batch, ModelInputs):
        out = batch.call(model)
    elif isinstance(batch, Mapping):
        out = model(**batch)
    elif isinstance(batch, (tuple, list)):
        out = model(*batch)
    else:
        out = model(batch)
    loss = loss_of(out)
    if loss is not None and loss.requires_grad:
        loss.backward()
    return loss


class NoUpdate:
    """The optimizer a re-run of a step sees: everything but ``step`` (and ``zero_grad``, which
    the re-run did already) reaches the real one."""

    def __init__(self, optimizer: Any) -> None:
        self._optimizer = optimizer

    def step(self, *args, **kwargs) -> None:
        return None

    def zero_grad(self, *args, **kwargs) -> None:
        return None

    def __getattr__(self, name: str) -> Any:
        if self._optimizer is None:
            raise AttributeError(name)
        return getattr(self._optimizer, name)


def write_json(path: Path, obj: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=2, default=str, ensure_ascii=False) + "\n", encoding="utf-8")


StepFn = Callable[[torch.nn.Module, Any, Any], Any]
