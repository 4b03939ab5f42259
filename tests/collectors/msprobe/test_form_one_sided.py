"""Issue 14, one-sided evidence forms: dumps of the failing run only (no baseline), of a run and its
rerun, across ranks; and msprobe monitor alerts. End to end through the rules: the NaN's origin
wins over its propagation and over the structure difference it causes, a NaN that moves between
reruns points to memory overwriting."""
from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

from precdx.diagnosis import diagnose
from precdx.errors import Warnings
from precdx.pipeline import collect, discover

from .conftest import collect_case, of_type, run_dir

NAN_DUMP = "13_nan_overflow/dump_path"
BASE_DUMP = "02_dump_mix_statistics/dump_path"


def _diagnose(**runs):
    w = Warnings()
    facts = collect(discover(**runs, warnings=w), w)
    return diagnose(facts, warnings=w), facts


def test_target_only_dump_locates_the_first_nan(samples: Path) -> None:
    out, facts = _diagnose(target=samples / NAN_DUMP)
    nan = facts.first("first_nan")
    assert (nan.api, nan.kind, nan.module, nan.baseline_finite) == (
        "Tensor.__mul__.1.forward", "operator_output", "block.attn", None)
    assert out.hypotheses[0].failure_mode == "nan.operator_origin"


def test_nan_outranks_the_one_sided_api_that_made_it(samples: Path) -> None:
    out, _ = _diagnose(target=samples / NAN_DUMP, baseline=samples / BASE_DUMP)
    ranked = [h.failure_mode for h in out.hypotheses]
    assert ranked[0] == "nan.operator_origin"
    assert "extra calls" in json.dumps([e.model_dump() for e in out.hypotheses[0].evidence])
    if "model.structure_mismatch" in ranked:
        structure = out.hypotheses[ranked.index("model.structure_mismatch")]
        assert structure.score < out.hypotheses[0].score / 2


def test_two_ranks_origin_beats_the_collective(samples: Path) -> None:
    out, facts = _diagnose(target=samples / "15_distributed_2rank_gloo/dump_nan_op_on_rank1")
    top = out.hypotheses[0]
    assert top.failure_mode == "nan.operator_origin"
    assert "rank 1" in top.evidence[0].text and "Distributed.all_reduce" in json.dumps(
        [e.model_dump() for e in top.evidence])
    scores = {h.failure_mode: h.score for h in out.hypotheses}
    assert scores.get("nan.communication_origin", 0.0) < top.score


def _moved_nan_rerun(samples: Path, dst: Path) -> Path:
    """The NaN sample's dump as a rerun in which the multiply that made the NaN stayed finite
    and a later API broke instead (what memory overwritten by another stream looks like)."""
    shutil.copytree(samples / NAN_DUMP, dst)
    dump = dst / "step0/rank0/dump.json"
    text = dump.read_text()
    data = json.loads(text)
    out = data["data"]["Tensor.__mul__.1.forward"]["output"][0]
    out.update({"Max": 1.0e30, "Min": -1.0e30, "Mean": 0.5, "Norm": 3.0e31})
    dump.write_text(json.dumps(data))
    return dst


def test_nan_moving_between_reruns_is_memory_stomping(samples: Path, tmp_path: Path) -> None:
    rerun = _moved_nan_rerun(samples, tmp_path / "target_rerun")
    out, facts = _diagnose(target=samples / NAN_DUMP, target_reruns=[rerun])
    nans = {f.role: f for f in facts.of_type("first_nan")}
    assert nans["target"].api != nans["target_rerun"].api
    nd = facts.first("nondeterministic_api")
    assert nd is not None and nd.kind == "nonfinite_differs"
    assert out.hypotheses[0].failure_mode == "memory.stomping_multistream"
    assert out.verdict == "misaligned"


def test_rerun_with_the_same_nan_is_the_operator(samples: Path, tmp_path: Path) -> None:
    rerun = tmp_path / "target_rerun"
    shutil.copytree(samples / NAN_DUMP, rerun)
    out, facts = _diagnose(target=samples / NAN_DUMP, target_reruns=[rerun])
    assert out.hypotheses[0].failure_mode == "nan.operator_origin"
    assert facts.first("nondeterministic_api") is None


def test_monitor_alerts_sample(samples: Path) -> None:
    root = samples / "18_monitor_v1/out_nan_inf_weight_step2"
    facts, warnings = collect_case([run_dir("target", root)])
    alerts = of_type(facts, "monitor_anomaly")
    firsts = [a for a in alerts if a.first]
    assert len(firsts) == 1
    f = firsts[0]
    assert (f.module, f.step, f.rank, f.category, f.table) == ("block.mlp.fc1", 2, 0, "activation", "actv")
    assert math.isinf(f.value) and all(a.benign for a in alerts if a.step < 2)
    assert len({(a.tag, a.step) for a in alerts}) == len(alerts)   # two alert files, no duplicates
    out, _ = _diagnose(target=root)
    top = out.hypotheses[0]
    assert top.failure_mode == "nan.operator_origin"
    text = top.evidence[0].text
    assert "block.mlp.fc1" in text and "step 2" in text and "rank 0" in text
