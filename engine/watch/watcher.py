"""The watcher: checks each logged step of a live run against its reference and, at the first
breach, captures the evidence precdx's rules need into a case folder that ``precdx diagnose``
reads as it is.

While nothing breaches it only reads the scalars the loop logs (at the steps the reference
logged), keeps references to the step's inputs and the torch RNG state, and appends a log
line; the probe, state copies and file writes happen only after a breach.

Case folder (``out``)::

    watch.json                      what breached, what was captured, how to replay it
    baseline/                       the reference run's logs, configs, scripts (copied)
    target/                         the watched run (target_rerun/ when it reruns a reference):
        train.log                   its logged steps (Megatron-LM training_log layout)
        training_config.json        the config it was given plus the optimizer's settings
        env.txt, pip_freeze.txt     accuracy-relevant environment variables, installed packages
        msprobe_config.json         the probe settings (mindstudio-probe config layout)
        msprobe_dump/step{K}/rank{R}/   dump of a captured step (msprobe layout; K = iteration - 1)
        precdx_watch/iter{N}/       checkpoint.pt, batch.pt, rng.pt, determinism.json (for replay)
"""
from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any, Iterable, Mapping

from precdx.errors import PrecdxError
from precdx.watch.checks import Breach, Checker, Point, Tolerances
from precdx.watch.runlog import RunLog

WATCH_FILE = "watch.json"
ACTIONS = ("continue", "stop")
SCHEMA = 1


def _scalar(x: Any) -> float | None:
    if x is None:
        return None
    try:
        return float(x.detach()) if hasattr(x, "detach") else float(x)
    except (TypeError, ValueError, RuntimeError):
        return None


def _plain_config(config: Any) -> dict[str, Any]:
    if config is None:
        return {}
    if hasattr(config, "to_dict"):
        config = config.to_dict()
    elif not isinstance(config, Mapping) and hasattr(config, "__dict__"):
        config = vars(config)
    if not isinstance(config, Mapping):
        raise PrecdxError(f"watch config must be a mapping or an object with attributes, not {type(config).__name__}")
    out: dict[str, Any] = {}
    for k, v in config.items():
        if isinstance(v, (bool, int, float, str)) or v is None:
            out[str(k)] = v
        elif isinstance(v, (list, tuple)) and all(isinstance(x, (bool, int, float, str)) for x in v):
            out[str(k)] = list(v)
        else:
            out[str(k)] = str(v)
    return out


class Watcher:
    """Watches one training run. Integrations (HF, Lightning, Megatron hook, ``watch()``) drive
    it through ``begin_step`` (optional: the step's batch), ``observe`` (a logged step's
    scalars) and ``end_step`` (the step boundary); ``close`` finishes the case folder.

    ``baseline``: run folder / log file / trainer_state.json / case folder checked with the
    documented tolerances. ``rerun_of``: an earlier run of the same job on the same device that
    this run must reproduce to its printed precision (needs ``baseline`` too). With neither,
    single-run sanity checks only. ``on_breach``: "continue" (capture, keep training) or "stop"
    (capture, then ask the loop to stop). ``capture_steps``: how many steps after the breach
    run with the probe on (0: none; a non-finite breach re-runs the breaching step itself
    first when the weights are still finite). ``step_fn(model, optimizer, batch)``: how to run
    one step again (the re-run of a non-finite step; the default calls the model on its
    recorded inputs and backpropagates a returned loss).
    """

    def __init__(self, model: Any = None, optimizer: Any = None, *, baseline: str | Path | None = None,
                 rerun_of: str | Path | None = None, out: str | Path = "precdx-watch",
                 on_breach: str = "continue", capture_steps: int = 1, tolerances: Tolerances | None = None,
                 config: Any = None, attach: Iterable[str | Path] = (), environment: bool = True,
                 step_fn: Any = None, summary_mode: str | None = None, level: str = "mix",
                 rank: int | None = None, log_interval: int | None = None, total_steps: int | None = None,
                 save_state: bool = True, state_limit_bytes: int = 1 << 30, framework: str = "torch",
                 replay_hint: Mapping[str, str] | None = None, quiet: bool = False) -> None:
        from precdx.watch.reference import load_reference

        if on_breach not in ACTIONS:
            raise PrecdxError(f"on_breach must be one of {', '.join(ACTIONS)}, not {on_breach!r}")
        if capture_steps < 0:
            raise PrecdxError("capture_steps must be >= 0")
        if rerun_of is not None and baseline is None:
            raise PrecdxError("rerun_of needs baseline too (a case compares the runs against a baseline)")
        if isinstance(model, (list, tuple)):
            if len(model) != 1:
                raise PrecdxError("pass one model (chunk) to watch, not a list of several")
            model = model[0]
        self.model = model
        self.optimizer = optimizer
        self.tol = tolerances or Tolerances()
        self.loaded = []
        if baseline is not None:
            self.loaded.append(load_reference(baseline, "baseline", tol=self.tol))
        if rerun_of is not None:
            self.loaded.append(load_reference(rerun_of, "target", exact=True, tol=self.tol))
        self.references = [lr.reference for lr in self.loaded]
        self.checker = Checker(self.references, self.tol)
        self.role = "target_rerun" if rerun_of is not None else "target"
        self.out = Path(out)
        self.on_breach = on_breach
        self.capture_steps = capture_steps
        self.config = _plain_config(config)
        self.attach = [Path(a) for a in attach]
        self.environment = environment
        self.step_fn = step_fn
        self.summary_mode = summary_mode or ("md5" if rerun_of is not None else "statistics")
        self.level = level
        self.rank = rank if rank is not None else _dist_rank()
        self.save_state = save_state
        self.state_limit_bytes = state_limit_bytes
        self.framework = framework
        self.replay_hint = dict(replay_hint or {})
        self.quiet = quiet
        intervals = [r.interval for r in self.references]
        self.log_interval = log_interval or (min(intervals) if intervals else 1)
        self.ref_steps = set().union(*(set(r.points) for r in self.references)) if self.references else set()
        self.ref_last = max((r.last_step or 0) for r in self.references) if self.references else 0
        self.average = any(r.windowed and r.interval > 1 for r in self.references)
        self._prepare_out()
        self.run_dir = self.out / self.role
        self.log = RunLog(self.run_dir / "train.log", framework, total_steps or self.ref_last or None)
        # per-step state
        self.iteration = 0
        self._step_open = False
        self._inputs: tuple | None = None
        self._batch: Any = None
        self._has_batch = False
        self._rng_torch = None
        self._lr_start: float | None = None
        self._acc_loss: Any = 0.0
        self._acc_n = 0
        self._rerunning = False
        # breach and capture state
        self.breach: Breach | None = None
        self.breaches: list[Breach] = []
        self.captured: list[dict[str, Any]] = []
        self.first_nan: dict[str, Any] | None = None
        self.notes: list[str] = []
        self._captures_left = 0
        self._recorder = None
        self._recorder_iter: int | None = None
        self.should_stop = False
        self.closed = False
        self._handles: list[Any] = []
        if model is not None:
            self._handles.append(model.register_forward_pre_hook(self._on_forward, with_kwargs=True))

    # ----- output folder -------------------------------------------------------------
    def _prepare_out(self) -> None:
        if self.out.exists() and any(self.out.iterdir()):
            if not (self.out / WATCH_FILE).is_file():
                raise PrecdxError("output folder exists and is not a precdx watch case; refusing to overwrite it",
                                  path=str(self.out))
            shutil.rmtree(self.out)
        self.out.mkdir(parents=True, exist_ok=True)
        self._write_status()

    # ----- hooks ---------------------------------------------------------------------
    def _on_forward(self, module, args, kwargs):
        if self._rerunning or self._step_open or not getattr(module, "training", True):
            return None  # a re-run, a later micro-batch of the step, or an evaluation forward
        import torch
        self._step_open = True
        self._inputs = (args, kwargs)
        self._rng_torch = torch.get_rng_state()
        if self.optimizer is not None and getattr(self.optimizer, "param_groups", None):
            lr = self.optimizer.param_groups[0].get("lr")
            self._lr_start = lr if isinstance(lr, float) else None
        if self._recorder is not None and not self._recorder.started:
            self._start_capture()
        return None

    # ----- driving API ---------------------------------------------------------------
    def begin_step(self, batch: Any) -> None:
        """The batch of the step about to run (what a replay feeds the step function)."""
        self._batch = batch
        self._has_batch = True

    def observe(self, step: int, loss: Any, grad_norm: Any = None, *, lr: Any = None, loss_scale: Any = None,
                skipped: bool = False, averaged: bool = False) -> bool:
        """A logged step's scalars; returns True when the loop should stop (on_breach="stop")."""
        if self.closed:
            return self.should_stop
        self.iteration = int(step)
        if self._recorder is not None and self._recorder.started and self._recorder_iter == self.iteration:
            self._finish_capture()
        if self.average and not averaged and loss is not None:
            self._acc_loss = self._acc_loss + (loss.detach() if hasattr(loss, "detach") else loss)
            self._acc_n += 1
        if not self._read_step(self.iteration):
            return self.should_stop
        if self.average and not averaged and self._acc_n:
            loss_v = _scalar(self._acc_loss)
            loss_v = None if loss_v is None else loss_v / self._acc_n
            self._acc_loss, self._acc_n = 0.0, 0
        else:
            loss_v = _scalar(loss)
        lr_v = _scalar(lr) if lr is not None else self._lr_start
        p = Point(self.iteration, loss_v, _scalar(grad_norm), lr_v, _scalar(loss_scale), bool(skipped))
        self.log.write(p)
        found = self.checker.observe(p)
        if found and self.breach is None:
            self._on_breach(found)
        return self.should_stop

    def end_step(self) -> None:
        """The step boundary: the next forward belongs to the next step."""
        if self._recorder is not None and self._recorder.started and not self._recorder.finished:
            self._finish_capture()
        self._step_open = False
        self._inputs = None
        self._batch, self._has_batch = None, False

    def step(self, loss: Any, grad_norm: Any = None, *, lr: Any = None, loss_scale: Any = None,
             skipped: bool = False, step: int | None = None) -> bool:
        """Plain loops: call once per iteration, after backward (before or after the optimizer
        step). Returns True when the loop should stop."""
        stop = self.observe(step if step is not None else self.iteration + 1, loss, grad_norm, lr=lr,
                            loss_scale=loss_scale, skipped=skipped)
        self.end_step()
        return stop

    batch = begin_step

    def _read_step(self, step: int) -> bool:
        if step in self.ref_steps:
            return True
        if self.references and step <= self.ref_last:
            return False
        return step % self.log_interval == 0

    # ----- breach --------------------------------------------------------------------
    def _on_breach(self, found: list[Breach]) -> None:
        self.breaches = found
        self.breach = found[0]
        self._say(f"precdx watch: breach at step {self.breach.step} ({self.breach.check}): {self.breach.en}")
        self._write_case()
        self._captures_left = self.capture_steps
        if self._captures_left and self.breach.nonfinite and self._rerun_step(self.breach.step):
            self._captures_left = max(0, self._captures_left - 1)
        left = self._captures_left
        if left and self.model is not None:
            self._arm()
        elif self.on_breach == "stop":
            self.should_stop = True
        self._write_status()

    def _arm(self) -> None:
        from precdx.watch.capture import StepRecorder
        nxt = self.iteration + 1
        self._recorder = StepRecorder(self.model, self.run_dir / "msprobe_dump", nxt - 1,
                                      summary_mode=self.summary_mode, level=self.level, rank=self.rank).install()
        self._recorder_iter = nxt

    def _state_dir(self, iteration: int) -> Path:
        return self.run_dir / "precdx_watch" / f"iter{iteration}"

    def _save_state(self, iteration: int, rng: dict[str, Any], batch: Any) -> dict[str, Any]:
        import torch
        from precdx.watch.capture import determinism_state, snapshot, state_bytes, to_cpu, write_json
        d = self._state_dir(iteration)
        d.mkdir(parents=True, exist_ok=True)
        info: dict[str, Any] = {"state": d.relative_to(self.out).as_posix()}
        if self.save_state and self.model is not None:
            size = state_bytes(self.model, self.optimizer)
            if size <= self.state_limit_bytes:
                torch.save(snapshot(self.model, self.optimizer), d / "checkpoint.pt")
                info["checkpoint"] = "checkpoint.pt"
            else:
                info["checkpoint"] = None
                info["checkpoint_note"] = (f"model and optimizer state is {size / 2 ** 30:.1f} GiB (over the "
                                           f"{self.state_limit_bytes / 2 ** 30:.1f} GiB limit): give the training "
                                           f"checkpoint saved after iteration {iteration - 1} to replay --checkpoint")
        try:
            torch.save(to_cpu(batch), d / "batch.pt")
            info["batch"] = "batch.pt"
        except TypeError as exc:
            info["batch"] = None
            info["batch_note"] = f"{exc}: replay needs --batch-fn"
        torch.save(rng, d / "rng.pt")
        write_json(d / "determinism.json", determinism_state())
        info["lr"] = self._lr_start
        return info

    def _step_batch(self) -> Any:
        from precdx.watch.capture import ModelInputs
        if self._has_batch:
            return self._batch
        if self._inputs is not None:
            return ModelInputs(tuple(self._inputs[0]), dict(self._inputs[1]))
        return None

    def _start_capture(self) -> None:
        from precdx.watch.capture import rng_state
        it = self._recorder_iter
        info = self._save_state(it, rng_state(), self._step_batch())
        self._pending = {"iteration": it, "dump_step": it - 1, "kind": "live", **info}

    def _finish_capture(self) -> None:
        rec = self._recorder
        self._recorder, self._recorder_iter = None, None
        dump = rec.finish()
        entry = getattr(self, "_pending", None) or {"iteration": rec.step_index + 1, "dump_step": rec.step_index}
        self._pending = None
        if dump is not None:
            entry["dump"] = dump.relative_to(self.out).as_posix()
            self.captured.append(entry)
            self._write_probe_config()
            self._say(f"precdx watch: captured iteration {entry['iteration']} into {dump}")
        self._captures_left -= 1
        if self._captures_left > 0 and not self.closed:
            self._arm()
        elif self.on_breach == "stop":
            self.should_stop = True
        self._write_status()

    def _rerun_step(self, iteration: int) -> bool:
        """Run the non-finite step again from the same weights, batch and RNG with the probe on
        (and locate its first NaN). Only when the weights are still finite (the update was
        skipped or is still to come)."""
        import torch
        from precdx.probe.nan_locator import locate_first_nan
        from precdx.watch.capture import (NoUpdate, StepRecorder, default_step, nonfinite_entries, rng_state,
                                          set_rng_state)
        if self.model is None or not self._step_open:
            self.notes.append("non-finite step not re-run: no forward of the model was seen in that step")
            return False
        params = list(self.model.parameters())
        with torch.no_grad():
            if not all(bool(torch.isfinite(p).all()) for p in params):
                self.notes.append(f"non-finite step {iteration} not re-run: the weights are already non-finite "
                                  "(the update was applied); the next step is captured instead")
                return False
        batch = self._step_batch()
        if batch is None:
            return False
        fn = self.step_fn or default_step
        grads = [p.grad for p in params]
        keep_rng = rng_state()
        start_rng = dict(keep_rng, torch=self._rng_torch)
        info = self._save_state(iteration, start_rng, batch)
        opt = NoUpdate(self.optimizer)

        def run() -> None:
            for p in params:
                p.grad = None
            set_rng_state(start_rng)
            fn(self.model, opt, batch)

        self._rerunning = True
        rec = StepRecorder(self.model, self.run_dir / "msprobe_dump", iteration - 1,
                           summary_mode=self.summary_mode, level=self.level, rank=self.rank).install()
        dump = None
        try:
            try:
                run()
            except Exception as exc:  # the user's step may assert on the NaN it produces
                self.notes.append(f"re-run of step {iteration} raised {type(exc).__name__}: {exc}")
            finally:
                dump = rec.finish()
            try:
                origin = locate_first_nan(self.model, run, step=iteration - 1, level=self.level)
            except Exception as exc:
                origin = None
                self.notes.append(f"first-NaN locator raised {type(exc).__name__}: {exc}")
            if origin is not None:
                self.first_nan = {"api": origin.api, "dump_step": origin.step, "inputs_finite": origin.inputs_finite,
                                  "module": origin.module, "code_line": origin.code_line}
        finally:
            self._rerunning = False
            for p, g in zip(params, grads):
                p.grad = g
            set_rng_state(keep_rng)
        if dump is None:
            return False
        record = rec.probe.records[-1] if rec.probe.records else None
        if record is None or not nonfinite_entries(record.data):
            # a clean re-run is no evidence about the NaN/Inf that breached: keep it out of the case
            shutil.rmtree(dump, ignore_errors=True)
            shutil.rmtree(self._state_dir(iteration), ignore_errors=True)
            self.notes.append(f"the non-finite value of step {iteration} did not reproduce when the step was "
                              "re-run from the same weights, batch and RNG (it arose outside the model's "
                              "forward/backward, e.g. in loss-scaled gradients, the optimizer or "
                              "communication); no dump kept")
            self._say(f"precdx watch: non-finite step {iteration} did not reproduce on re-run; no dump kept")
            self._captures_left = 0
            return True
        entry = {"iteration": iteration, "dump_step": iteration - 1, "kind": "rerun", **info,
                 "dump": dump.relative_to(self.out).as_posix()}
        self.captured.append(entry)
        self._write_probe_config()
        self._say(f"precdx watch: re-ran non-finite iteration {iteration} with the probe into {dump}"
                  + (f"; first NaN at {self.first_nan['api']}" if self.first_nan else ""))
        return True

    # ----- case folder ---------------------------------------------------------------
    def _write_case(self) -> None:
        from precdx.watch.capture import env_listing, pip_listing, write_json
        from precdx.watch.reference import copy_run
        for lr in self.loaded:
            folder = "baseline" if lr.reference.name == "baseline" else "target"
            self._copied = getattr(self, "_copied", {})
            if folder not in self._copied:
                self._copied[folder] = copy_run(lr, self.out / folder)
        if self.config:
            write_json(self.run_dir / "training_config.json", self.config)
        if self.environment:
            (self.run_dir / "env.txt").write_text(env_listing(), encoding="utf-8")
            (self.run_dir / "pip_freeze.txt").write_text(pip_listing(), encoding="utf-8")
        for a in self.attach:
            try:
                shutil.copyfile(a, self.run_dir / a.name)
            except OSError as exc:
                self.notes.append(f"could not attach {a}: {exc.strerror or exc}")

    def _optimizer_settings(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        opt = self.optimizer
        groups = getattr(opt, "param_groups", None) or []
        if not groups:
            return out
        g = groups[0]
        if isinstance(g.get("initial_lr"), float):
            out["lr"] = g["initial_lr"]
        wds = [gr.get("weight_decay") for gr in groups if isinstance(gr.get("weight_decay"), (int, float))]
        if wds:
            out["weight_decay"] = max(wds)
        betas = g.get("betas")
        if isinstance(betas, (tuple, list)) and len(betas) == 2 and all(isinstance(b, float) for b in betas):
            out["adam_beta1"], out["adam_beta2"] = betas
        if isinstance(g.get("eps"), float):
            out["adam_eps"] = g["eps"]
        out["optimizer"] = type(getattr(opt, "optimizer", opt)).__name__
        return out

    def _write_probe_config(self) -> None:
        from precdx.watch.capture import write_json
        steps = sorted({c["dump_step"] for c in self.captured})
        write_json(self.run_dir / "msprobe_config.json", {
            "task": "statistics", "dump_path": "./msprobe_dump", "rank": [], "step": steps, "level": self.level,
            "async_dump": False, "extra_info": True,
            "statistics": {"scope": [], "list": [], "data_mode": ["all"], "summary_mode": self.summary_mode,
                           "tensor_list": []}})

    def status(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA, "tool": "precdx watch", "framework": self.framework,
            "watched_run": getattr(self, "role", "target"),
            "last_step": getattr(self, "iteration", 0),
            "closed": getattr(self, "closed", False),
            "references": [{"name": r.reference.name, "source": r.reference.source, "exact": r.reference.exact,
                            "folder": "baseline" if r.reference.name == "baseline" else "target",
                            "copied": getattr(self, "_copied", {}).get(
                                "baseline" if r.reference.name == "baseline" else "target", [])}
                           for r in getattr(self, "loaded", [])],
            "tolerances": vars(self.tol) if hasattr(self, "tol") else None,
            "breach": self.breach.as_dict() if getattr(self, "breach", None) else None,
            "also_breached": [b.as_dict() for b in getattr(self, "breaches", [])[1:]],
            "captured": getattr(self, "captured", []),
            "first_nan": getattr(self, "first_nan", None),
            "optimizer": self._optimizer_settings() if getattr(self, "optimizer", None) is not None else None,
            "summary_mode": getattr(self, "summary_mode", None), "level": getattr(self, "level", None),
            "rank": getattr(self, "rank", 0),
            "probe_scope": "from the model's first forward to the end of its last backward in the step",
            "replay": {"reference_folder": "target" if getattr(self, "role", "target") == "target_rerun" else "baseline",
                       "hint": self.replay_hint or None},
            "notes": getattr(self, "notes", []),
        }

    def _write_status(self) -> None:
        from precdx.watch.capture import write_json
        write_json(self.out / WATCH_FILE, self.status())

    def _say(self, text: str) -> None:
        if not self.quiet:
            print(text, file=sys.stderr)

    # ----- end -----------------------------------------------------------------------
    def close(self) -> None:
        if self.closed:
            return
        if self._recorder is not None:
            if self._recorder.started:
                self._finish_capture()
            else:
                self._recorder.finish()
                self._recorder = None
        self.closed = True
        for h in self._handles:
            h.remove()
        self._handles.clear()
        self.log.close()
        if self.breach is None:
            self._write_case()
            self._say(f"precdx watch: no breach in {self.iteration} steps; case written to {self.out}")
        self._write_status()

    def __enter__(self) -> "Watcher":
        return self

    def __exit__(self, *exc) -> bool:
        self.close()
        return False

    @property
    def case_dir(self) -> Path:
        return self.out


def _dist_rank() -> int:
    try:
        import torch.distributed as dist
        if dist.is_available() and dist.is_initialized():
            return int(dist.get_rank())
    except ImportError:
        pass
    return 0


def watch(model: Any = None, optimizer: Any = None, *, baseline: str | Path | None = None, **kw: Any) -> Watcher:
    """Plain PyTorch loops::

        with watch(model, optimizer, baseline="gpu_run/") as w:
            for batch in loader:
                w.batch(batch)                       # optional: what a replay feeds
                loss = step(batch)                   # forward + backward
                gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                if w.step(loss, grad_norm=gn):       # True once on_breach="stop" wants out
                    break
    """
    return Watcher(model, optimizer, baseline=baseline, **kw)


def load_status(case_dir: str | Path) -> dict[str, Any]:
    import json
    path = Path(case_dir) / WATCH_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PrecdxError("not a precdx watch case (no watch.json)", path=str(case_dir)) from None
    except (OSError, ValueError) as exc:
        raise PrecdxError(f"cannot read watch.json: {exc}", path=str(path)) from None
    if not isinstance(data, dict) or not isinstance(data.get("captured", []), list):
        raise PrecdxError("watch.json is not a precdx watch status", path=str(path))
    return data


__all__ = ["Watcher", "watch", "load_status"]
