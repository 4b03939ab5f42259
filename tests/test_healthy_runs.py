"""Healthy runs (goodlogs): no misaligned hypothesis reaches the report threshold.

Healthy pairs: the aligned scenario, the baseline against its own rerun, and every scenario's
baseline against an exact copy of itself. The reviewed allowlist below may name exceptions
with a reason; it is empty today."""
import shutil

import pytest

from precdx.diagnosis import REPORT_THRESHOLD, diagnose
from precdx.errors import Warnings
from precdx.pipeline import collect, discover

ALLOWLIST: dict[str, str] = {}  # failure mode -> reason it may fire on a healthy run


def _misaligned(diag):
    return [(h.failure_mode, h.score) for h in diag.hypotheses
            if h.verdict == "misaligned" and h.score >= REPORT_THRESHOLD and h.failure_mode not in ALLOWLIST]


def _run(case=None, **kw):
    w = Warnings()
    diag = diagnose(collect(discover(case, warnings=w, **kw), w), engine="python", warnings=w)
    return diag


def test_aligned_scenarios(shared_dir):
    import yaml
    found = 0
    for case in sorted((shared_dir / "scenarios").iterdir()):
        exp = case / "expected.yaml"
        if exp.is_file() and yaml.safe_load(exp.read_text()).get("verdict") == "aligned":
            found += 1
            diag = _run(case)
            assert diag.verdict == "aligned", case.name
            assert not _misaligned(diag), (case.name, _misaligned(diag))
    assert found, "no aligned scenario found"


def test_baseline_against_its_rerun(shared_dir):
    for case in sorted((shared_dir / "scenarios").iterdir()):
        if (case / "baseline_rerun").is_dir():
            diag = _run(target=case / "baseline_rerun", baseline=case / "baseline")
            assert not _misaligned(diag), (case.name, _misaligned(diag))


@pytest.mark.parametrize("name", ["case-01", "case-02", "case-13", "case-18", "case-20"])
def test_run_against_a_copy_of_itself(shared_dir, tmp_path, name):
    src = shared_dir / "scenarios" / name / "baseline"
    copy = tmp_path / "copy"
    shutil.copytree(src, copy)
    diag = _run(target=copy, baseline=src)
    assert not _misaligned(diag), _misaligned(diag)
    assert diag.verdict in ("aligned", "inconclusive")
