"""Every fault of the demo lab under the watcher (tiny model, CPU): caught at the first step
where the documented tolerances break (worked out here independently, from an unwatched run of
the same target against the baseline's printed log), the breaching or next step captured and
replayed on the reference side, and the case diagnosed to the injected failure mode.

Config faults show at the first logged step (the learning rate differs from the baseline's);
nondeterminism is watched as a rerun of the target's first launch, which it must reproduce to
the printed precision."""
from __future__ import annotations

import json
import math
import re

import pytest

pytest.importorskip("torch")

import torch  # noqa: E402

from precdx.demo import FAULTS as ALL_FAULTS  # noqa: E402
from precdx.demo.device import DeviceProfile  # noqa: E402
from precdx.demo.lab import _configs, _nan_step  # noqa: E402
from precdx.demo.training import train  # noqa: E402
from precdx.demo.watching import run_watch_case  # noqa: E402
from precdx.diagnosis import diagnose  # noqa: E402
from precdx.errors import Warnings  # noqa: E402
from precdx.pipeline import collect, discover  # noqa: E402

SEED = 1234
# few steps keep the suite fast; the loss-scale collapse needs a few halvings to show in the log
FAULTS = {name: f for name, f in ALL_FAULTS.items() if f.watchable}   # the faults precdx demo --watch runs
STEPS = {name: 24 if name == "loss_scale_collapse" else 12 for name in FAULTS}
ITER = re.compile(r"iteration\s+(\d+)/")


def _printed(log: str) -> dict[int, tuple]:
    """iteration -> (lr, loss, grad norm, skipped) from Megatron-style lines (plain parsing)."""
    out = {}
    for line in log.splitlines():
        m = ITER.search(line)
        if not m:
            continue
        fields = {k.strip(): v.strip() for k, _, v in (p.partition(":") for p in line.split("|")) if v}
        num = (lambda key: float(fields[key]) if key in fields else None)
        out[int(m.group(1))] = (num("learning rate"), num("lm loss"), num("grad norm"),
                                int(fields.get("number of skipped iterations", "0")))
    return out


def _unwatched(fault, launch):
    steps = STEPS[fault.name]
    base_cfg, target_cfg = _configs(fault, steps, SEED)
    profile = DeviceProfile(target=True, fault=fault.name, noise_seed=SEED + 1, launch_seed=SEED + 100 + launch,
                            nan_step=_nan_step(steps) if fault.name == "nan_op" else None)
    return train(target_cfg, profile,
                 overflow_from=max(3, steps // 4) if fault.name == "loss_scale_collapse" else None)


def expected_breach(fault, baseline_log: str) -> int | None:
    """The documented tolerances, applied step by step (independent of precdx.watch)."""
    if fault.name == "nondeterministic_op":
        a, b = _unwatched(fault, 1), _unwatched(fault, 2)
        for x, y in zip(a.iterations, b.iterations):
            if f"{x.loss:.8E}" != f"{y.loss:.8E}" or f"{x.grad_norm:.8E}" != f"{y.grad_norm:.8E}":
                return x.iteration
        return None
    base = _printed(baseline_log)
    run = _unwatched(fault, 1)
    loss_errs, gn_errs = [], []
    for rec in run.iterations:
        lr, bl, bg, bskip = base[rec.iteration]
        if rec.skipped and not bskip:
            return rec.iteration
        if abs(rec.lr - lr) / lr > 1e-3:
            return rec.iteration
        le, ge = abs(rec.loss - bl) / bl, abs(rec.grad_norm - bg) / bg
        if not loss_errs and ((abs(rec.loss - bl) >= 0.005 and le >= 0.005) or ge > 0.10):
            return rec.iteration
        loss_errs, gn_errs = (loss_errs + [le])[-5:], (gn_errs + [ge])[-5:]
        if sum(loss_errs) / len(loss_errs) > 0.01 or sum(gn_errs) / len(gn_errs) > 0.10:
            return rec.iteration
    return run.failed_at


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("watch")
    try:
        yield {name: run_watch_case(name, root / name, steps=STEPS[name], seed=SEED, quiet=True) for name in FAULTS}
    finally:
        torch.set_num_threads(threads)


@pytest.mark.slow  # trains every demo fault under the watcher
@pytest.mark.parametrize("name", sorted(FAULTS))
def test_fault_caught_at_first_breach_and_diagnosed(cases, name):
    torch.set_num_threads(1)
    fault, case = FAULTS[name], cases[name]
    status = json.loads((case / "watch.json").read_text())
    baseline_log = (case.parent / "gpu_run" / "train.log").read_text()
    assert status["breach"] is not None, f"{name}: not caught"
    assert status["breach"]["step"] == expected_breach(fault, baseline_log), status["breach"]
    watched = "target_rerun" if name == "nondeterministic_op" else "target"
    assert status["watched_run"] == watched
    # the watcher does not change training: the watched log equals the baseline-free run's values
    if name != "nondeterministic_op":
        run = _unwatched(fault, 1)
        logged = _printed((case / watched / "train.log").read_text())
        for rec in run.iterations[: status["breach"]["step"] - 1]:
            assert math.isclose(logged[rec.iteration][1], rec.loss, rel_tol=1e-8)
    warnings = Warnings()
    diag = diagnose(collect(discover(case), warnings), engine="python", warnings=warnings)
    top = [(h.failure_mode, round(h.score, 2)) for h in diag.hypotheses[:3]]
    assert diag.verdict == "misaligned"
    assert diag.hypotheses[0].failure_mode == fault.failure_mode, top
    if name == "loss_scale_collapse":
        # the lab injects the overflow into the gradients after backward, not inside an operator:
        # re-running the step does not reproduce it, so no dump is kept and the log decides
        assert status["captured"] == [] and any("did not reproduce" in n for n in status["notes"])
        return
    captured = status["captured"][0]
    k = captured["dump_step"]
    ref = "target" if name == "nondeterministic_op" else "baseline"
    assert (case / watched / "msprobe_dump" / f"step{k}" / "rank0" / "dump.json").is_file()
    assert (case / ref / "msprobe_dump" / f"step{k}" / "rank0" / "dump.json").is_file()  # the replay
    if name == "nan_op":
        # the breaching step itself is re-run (weights still finite: the NaN stops the run before the update)
        assert captured["kind"] == "rerun" and captured["iteration"] == status["breach"]["step"]
        assert status["first_nan"]["api"] == "Functional.softmax.0.forward"
    else:
        assert captured["kind"] == "live" and captured["iteration"] == status["breach"]["step"] + 1
