"""Issue 14, evidence form 'monitor output only': msprobe's TrainerMon CSVs are evidence with or
without anomaly.json. A run's own CSVs give its alerts (derived when the monitor wrote no alert
file) and its first Inf/NaN; two runs' CSVs are compared step by step like module-level dumps
(first diverging module and step, kind, the step that matched before it; a rerun's first
difference). Real TrainerMon output from ../shared/msprobe-samples/18_monitor_v1, edited copies
for the two-run cases."""
from __future__ import annotations

import csv
import io
import math
import shutil
from pathlib import Path

from precdx.collectors.msprobe import monitor
from precdx.collectors.msprobe.monitor_localise import monitor_steps
from precdx.errors import Warnings

from .conftest import collect_case, of_type, run_dir

BASE = "18_monitor_v1/out_base"
NAN = "18_monitor_v1/out_nan_inf_weight_step2"


def _without_alerts(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("anomaly_detected"))
    return dst


def _edit(folder: Path, table: str, edit) -> None:
    """Apply edit(row dict) -> row dict to every row of one table's CSVs (in place)."""
    for path in folder.rglob(f"{table}_*.csv"):
        rows = list(csv.DictReader(io.StringIO(path.read_text())))
        if not rows:
            continue
        out = io.StringIO()
        w = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(edit(dict(r)) for r in rows)
        path.write_text(out.getvalue())


def _scale(names: set[str], step: int, factor: float):
    def edit(r):
        if r["name"] in names and int(r["step"]) == step:
            for k in ("min", "max", "mean", "norm"):
                r[k] = repr(float(r[k]) * factor)
        return r
    return edit


def test_nan_without_anomaly_json_is_found_in_the_csvs(samples: Path, tmp_path: Path) -> None:
    root = _without_alerts(samples / NAN, tmp_path / "target")
    facts, warnings = collect_case([run_dir("target", root)])
    alerts = of_type(facts, "monitor_anomaly")
    firsts = [a for a in alerts if a.first]
    assert len(firsts) == 1
    f = firsts[0]
    assert (f.module, f.step, f.category, f.rule) == ("block.mlp.fc1", 2, "activation", "AnomalyNan")
    assert all(a.benign for a in alerts if a.step < 2)     # the token ids' gradient rows
    nan = of_type(facts, "first_nan", method="monitor")[0]
    assert (nan.api_name, nan.step, nan.kind, nan.direction) == (
        "Module.block.mlp.fc1", 2, "operator_output", "forward")
    assert nan.baseline_finite is None
    assert list(warnings) == []


def test_alert_files_are_read_not_derived_again(samples: Path) -> None:
    facts, _ = collect_case([run_dir("target", samples / NAN)])
    sources = {a.source for a in of_type(facts, "monitor_anomaly")}
    assert all("anomaly" in s for s in sources)


def test_derived_alerts_match_the_real_ones(samples: Path) -> None:
    """What the real AnomalyNan rule wrote on the NaN run is what we derive from its CSVs."""
    root = samples / NAN
    tables = monitor.group_tables(sorted(root.rglob("*_0-3.csv")), Warnings())
    derived = {(a.target, a.table, a.step) for a in monitor.derive_alerts(tables)}
    real = set()
    for p in root.rglob("anomaly.json"):
        real |= {(a.target, a.table, a.step) for a in monitor.read_alerts(p)}
    assert real and real <= derived


def test_monitor_steps_are_module_entries(samples: Path) -> None:
    tables = monitor.group_tables(sorted((samples / BASE).rglob("*.csv")), Warnings())
    steps = monitor_steps(tables)
    assert [s.step for s in steps] == [0, 1, 2]
    names = [e.name.full for e in steps[0].entries]
    assert names[0] == "Module.embed.Monitored.forward.0"
    fwd = [n for n in names if ".forward." in n]
    assert "Module.block.mlp.fc1.Monitored.forward.0" in fwd and len(fwd) == 12   # root model excluded
    fc1 = next(e for e in steps[0].entries if e.name.full == "Module.block.mlp.fc1.Monitored.forward.0")
    assert {t.slot for t in fc1.params} == {"parameters.weight", "parameters.bias"}
    assert fc1.inputs[0].dtype == "torch.float32" and fc1.inputs[0].shape == (2, 8, 16)
    embed_bwd = next(e for e in steps[0].entries if e.name.full == "Module.embed.Monitored.backward.0")
    assert embed_bwd.outputs == [] or all(t.kind == "none" for t in embed_bwd.outputs)   # ids have no gradient


def _two_runs(samples: Path, tmp_path: Path, edit_target=None) -> list:
    base = _without_alerts(samples / BASE, tmp_path / "baseline")
    target = _without_alerts(samples / BASE, tmp_path / "target")
    if edit_target is not None:
        edit_target(target)
    facts, _ = collect_case([run_dir("baseline", base), run_dir("target", target)])
    return facts


def test_identical_monitors_give_no_divergence(samples: Path, tmp_path: Path) -> None:
    facts = _two_runs(samples, tmp_path)
    assert not of_type(facts, "first_divergence") and not of_type(facts, "first_nan")


def test_an_operator_between_two_modules_introduces(samples: Path, tmp_path: Path) -> None:
    """fc1 matches, fc2's input does not (the gelu between them): introduced in the MLP's code."""
    downstream = {"block.mlp.fc2.input", "block.mlp.fc2.output", "block.mlp.output", "block.output",
                  "ln_f.input", "ln_f.output", "head.input", "head.output", ".output"}
    facts = _two_runs(samples, tmp_path, lambda t: _edit(t, "actv", _scale(downstream, 0, 1.4)))
    d = of_type(facts, "first_divergence", method="monitor")[0]
    assert (d.api_name, d.step, d.kind, d.direction, d.after_loss) == (
        "Module.block.mlp.fc2", 0, "introduced", "forward", False)


def test_token_ids_differ_is_data_input(samples: Path, tmp_path: Path) -> None:
    def edit(t):
        _edit(t, "actv", _scale({"embed.input", "embed.output", ".input"}, 0, 1.3))
    facts = _two_runs(samples, tmp_path, edit)
    d = of_type(facts, "first_divergence", method="monitor")[0]
    assert (d.api_name, d.kind, d.family) == ("Module.embed", "data_input", "embedding")


def test_weights_off_at_step0_and_after_an_update(samples: Path, tmp_path: Path) -> None:
    facts = _two_runs(samples, tmp_path, lambda t: _edit(t, "param_origin", _scale({"embed.weight"}, 0, 1.2)))
    d = of_type(facts, "first_divergence", method="monitor")[0]
    assert (d.api_name, d.step, d.kind) == ("Module.embed", 0, "weights")

    def later(t):   # the update after step 0 moved a weight: step 0 matches, step 1 starts apart
        _edit(t, "param_origin", _scale({"block.mlp.fc2.weight"}, 1, 1.05))
    facts = _two_runs(samples, tmp_path / "later", later)
    d = of_type(facts, "first_divergence", method="monitor")[0]
    assert (d.api_name, d.step, d.kind) == ("Module.block.mlp.fc2", 1, "weights")
    steps = {(s.step, s.all_match) for s in of_type(facts, "dump_step_compare")}
    assert steps == {(0, True), (1, False)}


def test_the_loss_gradient_differs_after_a_matching_forward(samples: Path, tmp_path: Path) -> None:
    """Every module's forward matches; the gradient entering the head's backward (the loss's) is
    twice the baseline's: a loss definition or scaling difference."""
    def edit(r):
        if r["name"] not in (".input", "embed.input") and r["min"] != "nan":
            for k in ("min", "max", "mean", "norm"):
                r[k] = repr(float(r[k]) * 2.0)
        return r
    facts = _two_runs(samples, tmp_path, lambda t: (_edit(t, "actv_grad", edit), _edit(t, "grad_reduced", edit),
                                                    _edit(t, "grad_unreduced", edit)))
    d = of_type(facts, "first_divergence", method="monitor")[0]
    assert (d.api_name, d.step, d.direction, d.after_loss) == ("Module.head", 0, "parameters_grad", True)


def test_a_rerun_monitor_is_compared_exactly(samples: Path, tmp_path: Path) -> None:
    base = _without_alerts(samples / BASE, tmp_path / "target")
    rerun = _without_alerts(samples / BASE, tmp_path / "target_rerun")
    _edit(rerun, "actv", _scale({"block.attn.output", "block.ln2.input"}, 1, 1 + 2 ** -20))
    facts, _ = collect_case([run_dir("target", base), run_dir("target_rerun", rerun)])
    n = of_type(facts, "nondeterministic_api")[0]
    assert (n.role, n.against_role, n.step, n.api_name, n.kind) == (
        "target_rerun", "target", 1, "Module.block.attn", "nondeterministic_op")
    assert n.output_rel_err is not None and n.output_rel_err < 1e-3
    assert not of_type(facts, "first_divergence")


def test_nan_weight_of_a_step_that_never_updated_comes_from_the_previous_update(tmp_path: Path) -> None:
    """A run stopped by a NaN never reaches its update: the weights it computed with are what the
    previous update left (param_updated of the step before)."""
    from precdx.collectors.msprobe.monitor_localise import first_nan
    tables = {"actv": {("fc.input", 0): {"min": 0.0, "max": 1.0, "mean": 0.5, "norm": 2.0, "_dtype": "torch.float32",
                                         "_shape": [2, 4]},
                       ("fc.output", 0): {"min": 0.0, "max": 1.0, "mean": 0.5, "norm": 2.0,
                                          "_dtype": "torch.float32", "_shape": [2, 4]},
                       ("fc.input", 1): {"min": 0.0, "max": 1.0, "mean": 0.5, "norm": 2.0,
                                         "_dtype": "torch.float32", "_shape": [2, 4]},
                       ("fc.output", 1): {"min": math.nan, "max": math.nan, "mean": math.nan, "norm": math.nan,
                                          "nans": 8.0, "_dtype": "torch.float32", "_shape": [2, 4]}},
              "param_updated": {("fc.weight", 0): {"min": math.nan, "max": math.nan, "mean": math.nan,
                                                   "norm": math.nan, "nans": 1.0, "_dtype": "torch.float32",
                                                   "_shape": [4, 4]}}}
    step, loc = first_nan(monitor_steps(tables), tmp_path)
    assert (step, loc.kind, loc.api_name) == (1, "weight", "Module.fc")
