"""Bad input: truncated or garbage dumps, empty dumps, different levels, mismatched steps or
ranks, missing files -- a clear message naming the file, and partial results."""
from __future__ import annotations

import shutil
from pathlib import Path

from precdx.collectors.msprobe.tasks import DumpTask, run_task

from .conftest import collect_case, of_type, run_dir

BASE = "02_dump_mix_statistics/dump_path"


def _copy_base(samples: Path, dst: Path) -> Path:
    shutil.copytree(samples / BASE, dst / "msprobe_dump")
    return dst


def test_truncated_dump_gives_partial_result(samples: Path, tmp_path: Path) -> None:
    target = _copy_base(samples, tmp_path / "target")
    baseline = _copy_base(samples, tmp_path / "baseline")
    dump = target / "msprobe_dump/step0/rank0/dump.json"
    raw = dump.read_bytes()
    dump.write_bytes(raw[: len(raw) // 2])
    facts, warnings = collect_case([run_dir("target", target), run_dir("baseline", baseline)])
    bad = [w for w in warnings if w.get("path") == str(dump)]
    assert bad and "truncated" in bad[0]["message"]
    info = of_type(facts, "dump_info", role="target", step=0)[0]
    assert not info.complete and info.api_count > 0
    step0 = of_type(facts, "dump_step_compare", step=0)[0]
    assert step0.n_compared > 0 and step0.n_unmatched > 0      # what was read still compares
    assert of_type(facts, "dump_step_compare", step=1)[0].all_match


def test_garbage_and_empty_dumps(tmp_path: Path) -> None:
    garbage = tmp_path / "g" / "dump.json"
    garbage.parent.mkdir()
    garbage.write_bytes(b'{"task": "statistics", "data": {\x00\xff\xfe binary')
    rep = run_task(DumpTask(str(garbage)))
    assert rep.fatal is None and any("damaged" in m for m, _ in rep.warnings)
    empty = tmp_path / "e" / "dump.json"
    empty.parent.mkdir()
    empty.write_text('{"task": "statistics", "level": "L1", "framework": "pytorch", "data": {}}')
    rep = run_task(DumpTask(str(empty)))
    assert any("no entries" in m and p == str(empty) for m, p in rep.warnings)


def test_missing_dump_file_is_reported(tmp_path: Path) -> None:
    rep = run_task(DumpTask(str(tmp_path / "nope/dump.json"), str(tmp_path / "nope2/dump.json")))
    assert rep.fatal and "nope" in rep.fatal


def test_different_levels_compare_common_entries(samples: Path) -> None:
    rep = run_task(DumpTask(str(samples / "01_dump_L1_statistics/dump_path/step0/proc10287/dump.json"),
                            str(samples / BASE / "step0/rank0/dump.json")))
    assert any("different levels" in m for m, _ in rep.warnings)
    assert rep.n_compared > 0 and not any(k == "module" for k, _ in rep.against_only)


def test_mismatched_steps_and_ranks_warn(samples: Path, tmp_path: Path) -> None:
    target = tmp_path / "target"
    shutil.copytree(samples / BASE / "step0", target / "msprobe_dump/step0")
    baseline = tmp_path / "baseline"
    shutil.copytree(samples / BASE / "step0/rank0", baseline / "msprobe_dump/step0/rank1")
    facts, warnings = collect_case([run_dir("target", target), run_dir("baseline", baseline)])
    text = " | ".join(w["message"] for w in warnings)
    assert "step 0 rank 0" in text and "step 0 rank 1" in text
    assert not of_type(facts, "dump_step_compare")
    assert len(of_type(facts, "dump_info")) == 2


def test_unreadable_compare_csv_is_a_warning(tmp_path: Path) -> None:
    run = tmp_path / "target"
    run.mkdir()
    bad = run / "compare_result_1.csv"
    bad.write_text("NPU Name,Bench Name,Result\n" + "x" * 10 + "\n")
    facts, warnings = collect_case([run_dir("target", run)])
    summary, = of_type(facts, "compare_result_summary")
    assert summary.n_apis == 0


def test_binary_dump_in_a_dump_folder_is_reported(tmp_path: Path) -> None:
    dump = tmp_path / "target/msprobe_dump/step0/rank0/dump.json"
    dump.parent.mkdir(parents=True)
    dump.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00binary")
    facts, warnings = collect_case([run_dir("target", tmp_path / "target")])
    assert any(w.get("path") == str(dump) and "damaged" in w["message"] for w in warnings)
    info, = of_type(facts, "dump_info")
    assert not info.complete
