"""The probe: per-API and per-module statistics of chosen steps, in msprobe's dump layout.

How APIs are caught, and why: while a step is being recorded the probe replaces the
callables of ``torch.nn.functional``, ``torch`` and ``torch.Tensor`` (the set torch itself
lists as ``__torch_function__``-overridable, see catalogue.py) with thin wrappers, and puts
the originals back when the step ends. This is what mindstudio-probe does, and it is the
only choice that sees each call *as the user wrote it*:
- a ``TorchFunctionMode`` sees the Python-level functionals after ``handle_torch_function``
  has repacked their arguments (``layer_norm``'s weight becomes a keyword, ``softmax`` gains
  ``_stacklevel`` and ``dtype``), so ``input.2`` rows would not line up with msprobe's;
- a ``TorchDispatchMode`` sees aten ops (``aten.addmm`` instead of ``Functional.linear``),
  whose names match nothing in an msprobe dump.
Outside recorded steps nothing is patched and no hook is registered, so an idle probe
costs nothing. Modules get forward pre/post hooks, full backward hooks and per-parameter
post-accumulate hooks; API backward entries come from a hook on the output's autograd node,
which is why their ``output`` lists follow autograd (not the forward signature), as msprobe's do.
"""
from __future__ import annotations

import json
import linecache
import os
import sys
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import torch

from precdx.errors import PrecdxError
from precdx.probe.catalogue import WrapTarget, build_targets, is_low_risk
from precdx.probe.summary import SUMMARY_MODES, as_list, encode, is_finite_value, tensor_summary

LEVELS = ("L0", "L1", "mix")
_PROBE_DIR = os.path.dirname(os.path.abspath(__file__))
_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__))
# autograd.Function.apply (used by torch's backward-hook plumbing) calls view_as on the
# user's behalf; those calls are not the model's and msprobe does not see them either
_HOOK_PLUMBING = os.path.join(_TORCH_DIR, "autograd", "function.py")


class NonFiniteFound(Exception):
    """Raised inside the step to stop it at the first non-finite output (first-NaN locator)."""


@dataclass
class StepRecord:
    """What one recorded step produced: the three msprobe files as Python objects."""

    step: int
    task: str
    level: str
    data: dict[str, Any] = field(default_factory=dict)
    stack: dict[str, list] = field(default_factory=dict)
    construct: dict[str, str | None] = field(default_factory=dict)

    def dump_json(self) -> dict[str, Any]:
        return {"task": self.task, "level": self.level, "framework": "pytorch",
                "dump_data_dir": None, "data": self.data}


def to_backward(name: str | None) -> str | None:
    """``Module.a.B.forward.0`` -> ``Module.a.B.backward.0``: the parent of a backward entry."""
    if name is None:
        return None
    return name.replace(".forward.", ".backward.") if name.startswith("Module.") else \
        name[: -len("forward")] + "backward"


def _frame_text(frame) -> str:
    filename = frame.f_code.co_filename
    line = linecache.getline(filename, frame.f_lineno).strip()
    return f"File {filename}, line {frame.f_lineno}, in {frame.f_code.co_name}, \n {line}"


def _caller_frames() -> list[str]:
    """The Python stack innermost first, without the probe's own frames on top."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_PROBE_DIR):
        frame = frame.f_back
    frames = []
    while frame is not None:
        frames.append(_frame_text(frame))
        frame = frame.f_back
    return frames


def user_code_line(frames: list[str]) -> str | None:
    """The innermost frame outside torch's own sources: where the user's code made the call."""
    for text in frames:
        path = text[len("File "):].split(", line ", 1)[0]
        if not os.path.abspath(path).startswith(_TORCH_DIR):
            return text
    return frames[0] if frames else None


class Probe:
    """Records chosen steps of a torch training loop into msprobe-format dumps.

    ``model`` is the root module (not itself dumped, as in msprobe); ``dump_path`` the dump
    root (``None`` keeps records in memory only, see ``records``); ``steps`` the 0-based
    step numbers to record (``None`` = every step); ``rank`` names ``rank<R>/`` (``None``
    writes ``proc<pid>/`` like an unlaunched msprobe run).
    """

    def __init__(self, model: torch.nn.Module | None = None, dump_path: str | Path | None = None, *,
                 level: str = "mix", summary_mode: str = "statistics", steps: list[int] | None = None,
                 rank: int | None = 0, risk_level: str = "FOCUS", extra_info: bool = True,
                 stop_at_nonfinite: bool = False) -> None:
        if level not in LEVELS:
            raise PrecdxError(f"unknown probe level {level!r}; expected one of {', '.join(LEVELS)}")
        if summary_mode not in SUMMARY_MODES:
            raise PrecdxError(f"unknown summary_mode {summary_mode!r}; expected one of {', '.join(SUMMARY_MODES)}")
        if level != "L1" and model is None:
            raise PrecdxError(f"probe level {level} records modules and needs a model")
        self.model = model
        self.dump_path = Path(dump_path) if dump_path is not None else None
        self.level = level
        self.summary_mode = summary_mode
        self.steps = None if steps is None else sorted(set(int(s) for s in steps))
        self.rank = rank
        self.risk_level = risk_level
        self.extra_info = extra_info
        self.stop_at_nonfinite = stop_at_nonfinite
        self.current_step = 0
        self.records: list[StepRecord] = []
        self.first_nonfinite: dict[str, Any] | None = None
        self._record: StepRecord | None = None
        self._paused: StepRecord | None = None
        self._busy = False
        self._patched: list[WrapTarget] = []
        self._handles: list[Any] = []

    # ----- public control -------------------------------------------------------------
    @property
    def recording(self) -> bool:
        return self._record is not None

    def wants(self, step: int) -> bool:
        return self.steps is None or step in self.steps

    def start(self) -> None:
        """Begin recording the current step (no-op when the step is not wanted)."""
        if self._record is not None or not self.wants(self.current_step):
            return
        self._record = StepRecord(self.current_step, "statistics", self.level)
        self._api_counts: dict[str, int] = {}
        self._fwd_counts: dict[str, int] = {}
        self._bwd_counts: dict[str, int] = {}
        self._module_stack: list[str] = []
        self._backward_stack: list[str] = []
        self._pending: dict[int, list[tuple]] = {}
        self._stack_index: dict[tuple[str, ...], str] = {}
        self._param_grads: dict[int, dict[str, list]] = {}
        self._param_rounds: dict[int, int] = {}
        if self.level != "L1":
            # torch warns each step that a module without grad-requiring inputs (an embedding
            # fed token ids) reports its backward at its outputs; expected here, not news
            warnings.filterwarnings("ignore", message="Full backward hook is firing when gradients")
            self._install_module_hooks()
        if self.level != "L0":
            self._install_api_wrappers()

    def pause(self) -> None:
        """Stop recording calls until ``resume`` without ending the step's record: e.g. between
        a micro-batch's backward and the next micro-batch's forward, or over gradient clipping
        and the update. Wrappers and hooks come off meanwhile (torch is as it was)."""
        if self._record is not None:
            self._paused, self._record = self._record, None
            self._uninstall()

    def resume(self) -> None:
        if self._paused is not None and self._record is None:
            self._record, self._paused = self._paused, None
            if self.level != "L1":
                self._install_module_hooks()
            if self.level != "L0":
                self._install_api_wrappers()

    def stop(self) -> StepRecord | None:
        """End recording; write the step's files when a dump path was given."""
        if self._paused is not None and self._record is None:
            self._record, self._paused = self._paused, None
        record = self._record
        if record is None:
            return None
        self._uninstall()
        self._record = None
        self.records.append(record)
        if self.dump_path is not None:
            self.write(record)
        return record

    def step(self) -> None:
        self.current_step += 1

    @contextmanager
    def capture(self) -> Iterator["Probe"]:
        """``with probe.capture(): <one training step>`` = start, run, stop, step."""
        self.start()
        try:
            yield self
        finally:
            self.stop()
            self.step()

    def step_dir(self, step: int) -> Path:
        assert self.dump_path is not None
        who = f"rank{self.rank}" if self.rank is not None else f"proc{os.getpid()}"
        return self.dump_path / f"step{step}" / who

    def write(self, record: StepRecord) -> Path:
        out = self.step_dir(record.step)
        try:
            out.mkdir(parents=True, exist_ok=True)
            _write_json(out / "dump.json", record.dump_json())
            if self.extra_info:
                _write_json(out / "stack.json", record.stack)
            _write_json(out / "construct.json", record.construct)
        except OSError as exc:
            raise PrecdxError(f"cannot write the probe dump: {exc.strerror or exc}", path=str(out)) from exc
        return out

    def config(self) -> dict[str, Any]:
        """The mindstudio-probe ``PrecisionDebugger`` config that matches this probe."""
        return {"task": "statistics", "dump_path": "./msprobe_dump", "rank": [],
                "step": list(self.steps or []), "level": self.level, "async_dump": False,
                "extra_info": self.extra_info,
                "statistics": {"scope": [], "list": [], "data_mode": ["all"],
                               "summary_mode": self.summary_mode, "tensor_list": []}}

    # ----- installation ---------------------------------------------------------------
    def _install_api_wrappers(self) -> None:
        for target in build_targets():
            setattr(target.owner, target.attr, self._make_wrapper(target))
            self._patched.append(target)

    def _install_module_hooks(self) -> None:
        assert self.model is not None
        for path, module in self.model.named_modules():
            if not path:
                continue  # msprobe does not dump the root it was given
            self._handles.append(module.register_forward_pre_hook(
                self._make_pre_hook(path), with_kwargs=True))
            self._handles.append(module.register_forward_hook(
                self._make_post_hook(path), with_kwargs=True))
            self._handles.append(module.register_full_backward_pre_hook(
                self._make_backward_pre_hook(path)))
            self._handles.append(module.register_full_backward_hook(self._make_backward_hook(path)))
            params = [(n, p) for n, p in module.named_parameters(recurse=False) if p.requires_grad]
            for pname, param in params:
                self._handles.append(param.register_post_accumulate_grad_hook(
                    self._make_param_hook(path, module, pname, len(params))))

    def _uninstall(self) -> None:
        for target in reversed(self._patched):
            if target.owned:
                setattr(target.owner, target.attr, target.original)
            else:
                delattr(target.owner, target.attr)
        self._patched.clear()
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        self._busy = False

    # ----- API recording --------------------------------------------------------------
    def _make_wrapper(self, target: WrapTarget) -> Callable:
        original = target.original
        short = f"{target.prefix}.{target.attr}"
        low = self.risk_level == "FOCUS" and is_low_risk(target.attr)
        probe = self

        def wrapper(*args, **kwargs):
            if probe._busy or probe._record is None \
                    or sys._getframe(1).f_code.co_filename == _HOOK_PLUMBING:
                return original(*args, **kwargs)
            return probe._call_api(short, low, original, args, kwargs)

        wrapper.__name__ = target.attr
        wrapper.__qualname__ = getattr(original, "__qualname__", target.attr)
        wrapper.__doc__ = getattr(original, "__doc__", None)
        return wrapper

    def _call_api(self, short: str, low: bool, original: Callable, args: tuple, kwargs: dict) -> Any:
        record = self._record
        index = self._api_counts.get(short, 0)
        self._api_counts[short] = index + 1
        name = f"{short}.{index}.forward"
        parent = self._module_stack[-1] if self._module_stack else None
        if self.level == "mix":
            record.construct[name] = parent
        self._busy = True
        try:
            if not low:
                frames = _caller_frames()
                in_args = encode(list(args), self.summary_mode)
                in_kwargs = encode(kwargs, self.summary_mode)
            result = original(*args, **kwargs)
            if not low:
                outputs = as_list(result)
                record.data[name] = {"input_args": in_args, "input_kwargs": in_kwargs,
                                     "output": encode(outputs, self.summary_mode)}
                self._add_stack(name, frames)
                if self.stop_at_nonfinite and not is_finite_value(outputs) \
                        and not _masking_inf(short, outputs):
                    self._found_nonfinite(name, parent, args, kwargs, record.data[name], frames)
            self._hook_api_backward(short, index, low, parent, args, result)
        finally:
            self._busy = False
        return result

    def _hook_api_backward(self, short: str, index: int, low: bool, parent: str | None,
                           args: tuple, result: Any) -> None:
        inputs = {id(a) for a in args if isinstance(a, torch.Tensor)}
        nodes = []
        for out in as_list(result):
            # an op returning one of its inputs would hook the producer's node, not its own
            if isinstance(out, torch.Tensor) and out.grad_fn is not None and id(out) not in inputs \
                    and out.grad_fn not in nodes:
                nodes.append(out.grad_fn)
        if not nodes:
            return
        name = f"{short}.{index}.backward"
        token = self._record

        def on_backward(grad_inputs, grad_outputs):
            if self._record is not token or self._busy:
                return
            bparent = self._backward_stack[-1] if self._backward_stack else None
            if self.level == "mix":
                token.construct[name] = bparent
            if low:
                return
            self._busy = True
            try:
                token.data[name] = {"input": encode(list(grad_outputs), self.summary_mode),
                                    "output": encode(list(grad_inputs), self.summary_mode)}
                if self.stop_at_nonfinite and not is_finite_value(list(grad_inputs)):
                    self._found_nonfinite(name, bparent, grad_outputs, {},
                                          token.data[name], None)
            finally:
                self._busy = False

        nodes[0].register_hook(on_backward)

    def _add_stack(self, name: str, frames: list[str]) -> None:
        if not self.extra_info:
            return
        key = tuple(frames)
        index = self._stack_index.get(key)
        if index is None:
            index = str(len(self._stack_index))
            self._stack_index[key] = index
            self._record.stack[index] = [[name], frames]
        else:
            self._record.stack[index][0].append(name)

    def _found_nonfinite(self, name: str, parent: str | None, args: Any, kwargs: dict,
                         entry: dict[str, Any], frames: list[str] | None) -> None:
        self.first_nonfinite = {
            "api": name,
            "step": self._record.step,
            "inputs_finite": is_finite_value(list(args)) and is_finite_value(kwargs),
            "entry": entry,
            "module": parent,
            "code_line": user_code_line(frames) if frames else None,
            "stack": frames or [],
        }
        raise NonFiniteFound(name)

    # ----- module recording -----------------------------------------------------------
    def _make_pre_hook(self, path: str) -> Callable:
        def pre_hook(module, args, kwargs):
            if self._record is None or self._busy:
                return None
            cls = type(module).__name__
            index = self._fwd_counts.get(path, 0)
            self._fwd_counts[path] = index + 1
            name = f"Module.{path}.{cls}.forward.{index}"
            parent = self._module_stack[-1] if self._module_stack else None
            self._record.construct[name] = parent
            self._module_stack.append(name)
            self._busy = True
            try:
                self._add_stack(name, _caller_frames())
                pending = (name, encode(list(args), self.summary_mode), encode(kwargs, self.summary_mode))
            finally:
                self._busy = False
            self._pending.setdefault(id(module), []).append(pending)
            return None
        return pre_hook

    def _make_post_hook(self, path: str) -> Callable:
        def post_hook(module, args, kwargs, output):
            queue = self._pending.get(id(module))
            if self._record is None or self._busy or not queue:
                return None
            name, in_args, in_kwargs = queue.pop()
            if self._module_stack and self._module_stack[-1] == name:
                self._module_stack.pop()
            self._busy = True
            try:
                params = {pname: tensor_summary(p, self.summary_mode)
                          for pname, p in module.named_parameters(recurse=False)}
                outputs = as_list(output)
                self._record.data[name] = {"input_args": in_args, "input_kwargs": in_kwargs,
                                           "output": encode(outputs, self.summary_mode),
                                           "parameters": params}
            finally:
                self._busy = False
            return None
        return post_hook

    def _make_backward_pre_hook(self, path: str) -> Callable:
        # a backward module stack, so API backward entries get the module whose backward is
        # running when autograd reaches them (not the forward parent: they can differ)
        def backward_pre_hook(module, grad_output):
            if self._record is None or self._busy:
                return None
            cls = type(module).__name__
            index = self._bwd_counts.get(path, 0)
            self._bwd_counts[path] = index + 1
            name = f"Module.{path}.{cls}.backward.{index}"
            self._record.construct[name] = self._backward_stack[-1] if self._backward_stack else None
            self._backward_stack.append(name)
            return None
        return backward_pre_hook

    def _make_backward_hook(self, path: str) -> Callable:
        def backward_hook(module, grad_input, grad_output):
            if self._record is None or self._busy:
                return None
            prefix = f"Module.{path}.{type(module).__name__}.backward."
            name = next((n for n in reversed(self._backward_stack) if n.startswith(prefix)), None)
            if name is None:
                return None
            self._backward_stack.remove(name)
            self._busy = True
            try:
                self._record.data[name] = {
                    "input": encode(list(grad_output), self.summary_mode),
                    "output": encode([g for g in grad_input if g is not None], self.summary_mode)}
            finally:
                self._busy = False
            return None
        return backward_hook

    def _make_param_hook(self, path: str, module: torch.nn.Module, pname: str, expected: int) -> Callable:
        key = id(module)

        def param_hook(param):
            if self._record is None or param.grad is None:
                return
            self._busy = True
            try:
                got = self._param_grads.setdefault(key, {})
                got[pname] = [tensor_summary(param.grad, self.summary_mode) | {"requires_grad": False}]
            finally:
                self._busy = False
            if len(got) == expected:
                round_ = self._param_rounds.get(key, 0)
                self._param_rounds[key] = round_ + 1
                name = f"Module.{path}.{type(module).__name__}.parameters_grad.{round_}"
                self._record.data[name] = got
                self._param_grads[key] = {}
        return param_hook


# Ops that write -inf on purpose (attention masks): their infinities are not an accident
_MASKING = frozenset({"masked_fill", "masked_fill_", "where", "triu", "tril", "full", "full_like", "fill_"})


def _masking_inf(short: str, outputs: list[Any]) -> bool:
    """A masking op whose output holds infinities but no NaN (msprobe's NaN analysis leaves
    these out too)."""
    if short.rsplit(".", 1)[-1] not in _MASKING:
        return False
    return not any(isinstance(o, torch.Tensor) and o.is_floating_point() and bool(torch.isnan(o).any())
                   for o in outputs)


def _write_json(path: Path, obj: Any) -> None:
    # msprobe writes Python json (bare NaN/Infinity) with a one-space indent
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(obj, fh, indent=1, ensure_ascii=False)
