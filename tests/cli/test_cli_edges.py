"""The CLI's rough edges, each through the real command (click's CliRunner, and a subprocess
where the exit path of the installed entry point matters)."""
from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from precdx.cli import main

REPO = Path(__file__).resolve().parents[2]


def megatron_log(n: int = 60, drift: float = 0.0, every: int = 10, extra: str = "") -> str:
    lines = []
    for i in range(every, n * every + 1, every):
        loss = 2.0 + 8.0 * 2.718281828 ** (-i / 120) + drift * i
        lines.append(f" iteration {i:8d}/ {n * every:8d} | consumed samples: {i * 8:10d} | lm loss: {loss:.6E} | "
                     f"loss scale: 65536.0 | grad norm: 1.000 | number of skipped iterations:   0 | "
                     f"number of nan iterations:   0 |")
    return "\n".join(lines) + "\n" + extra


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


# ------------------------------------------------------------------ --target / --baseline FILE
def test_target_and_baseline_may_be_log_files(tmp_path):
    t = write(tmp_path / "npu" / "train.log", megatron_log(drift=0.004))
    b = write(tmp_path / "gpu" / "train.log", megatron_log())
    write(tmp_path / "npu" / "other_job.log", megatron_log(n=80))  # would be chosen from the folder
    res = run("facts", "--target", str(t), "--baseline", str(b), "--format", "json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    series = {f["role"]: f for f in out["facts"] if f["type"] == "loss_series"}
    assert series["target"]["source"] == str(t) and series["target"]["n_points"] == 60
    assert any(f["type"] == "loss_compare" for f in out["facts"])
    assert not any("training logs in run" in w["message"] for w in out["warnings"])
    res = run("diagnose", "--target", str(t), "--baseline", str(b), "--format", "json")
    assert res.exit_code == 0 and json.loads(res.stdout)["verdict"] == "misaligned"


def test_a_file_that_is_no_artefact_is_one_clear_error(tmp_path):
    f = write(tmp_path / "notes.md", "# just notes\n")
    res = run("diagnose", "--target", str(f))
    assert res.exit_code == 2
    assert res.stderr.count("\n") == 1 and "not a training log or tracking file" in res.stderr
    assert "Traceback" not in res.output


# ------------------------------------------------------------------ compressed logs
def test_gz_and_zst_logs_are_read(tmp_path):
    zstandard = pytest.importorskip("zstandard", reason="the optional zstd extra")
    case = tmp_path / "case"
    write(case / "baseline" / "train.log.gz", gzip.compress(megatron_log().encode()))
    write(case / "target" / "train.log.zst", zstandard.ZstdCompressor().compress(megatron_log(drift=0.004).encode()))
    res = run("inspect", str(case))
    assert "train.log.gz: log [megatron]" in res.stdout and "train.log.zst: log [megatron]" in res.stdout
    res = run("facts", str(case), "--format", "json")
    out = json.loads(res.stdout)
    series = {f["role"]: f for f in out["facts"] if f["type"] == "loss_series"}
    assert series["baseline"]["n_points"] == series["target"]["n_points"] == 60
    assert [f for f in out["facts"] if f["type"] == "loss_compare"][0]["final_rel_err"] > 0.1
    # a single compressed file as the target
    res = run("facts", "--target", str(case / "target" / "train.log.zst"), "--format", "json")
    assert res.exit_code == 0 and any(f["type"] == "loss_series" for f in json.loads(res.stdout)["facts"])


def test_cut_off_and_corrupt_gz_logs_warn_and_never_crash(tmp_path):
    data = gzip.compress(megatron_log(n=400).encode())
    cut = write(tmp_path / "cut" / "train.log.gz", data[: len(data) // 2])
    bad = write(tmp_path / "bad" / "train.log.gz", b"\x1f\x8b" + bytes(range(256)) * 4)
    res = run("facts", "--target", str(cut.parent), "--format", "json")
    out = json.loads(res.stdout)
    n = [f for f in out["facts"] if f["type"] == "loss_series"][0]["n_points"]
    assert 0 < n < 400
    assert any("cut off" in w["message"] for w in out["warnings"])
    res = run("facts", "--target", str(bad.parent), "--format", "json")
    assert res.exit_code == 0
    out = json.loads(res.stdout)
    assert any("gzip" in w["message"] and w.get("path") == str(bad) for w in out["warnings"])


# ------------------------------------------------------------------ two training logs in one run folder
def test_two_training_logs_in_one_run_warn_and_are_not_merged(tmp_path):
    t = tmp_path / "target"
    write(t / "job_a.log", megatron_log(n=60))
    write(t / "job_b.log", megatron_log(n=20, drift=0.05, extra="Traceback (most recent call last):\n"))
    res = run("facts", "--target", str(t), "--format", "json")
    out = json.loads(res.stdout)
    msg = [w["message"] for w in out["warnings"] if "training logs in run" in w["message"]]
    assert len(msg) == 1
    assert "job_a.log: 60 iterations" in msg[0] and "job_b.log: 20 iterations" in msg[0]
    assert "using job_a.log alone" in msg[0] and "--target FILE" in msg[0]
    series = [f for f in out["facts"] if f["type"] == "loss_series"][0]
    assert series["source"] == str(t / "job_a.log")
    assert not [f for f in out["facts"] if f["type"] == "log_event" and f["kind"] == "traceback"]
    # the explicit choice
    res = run("facts", "--target", str(t / "job_b.log"), "--format", "json")
    out = json.loads(res.stdout)
    assert [f for f in out["facts"] if f["type"] == "log_event" and f["kind"] == "traceback"]
    assert not [w for w in out["warnings"] if "training logs in run" in w["message"]]


# ------------------------------------------------------------------ output path and fatal errors
def test_output_into_a_missing_folder_is_one_line_and_exit_2(tmp_path):
    b = write(tmp_path / "b" / "train.log", megatron_log())
    t = write(tmp_path / "t" / "train.log", megatron_log(drift=0.004))
    out = tmp_path / "missing" / "report.html"
    for fmt in ("text", "html"):
        res = run("diagnose", "--target", str(t), "--baseline", str(b), "--format", fmt, "-o", str(out),
                  "--fail-on", "misaligned")
        assert res.exit_code == 2, res.output
        assert res.stderr.count("\n") == 1 and "folder does not exist" in res.stderr
    res = run("diagnose", "--target", str(t), "--baseline", str(b), "-o", str(tmp_path), "--format", "json")
    assert res.exit_code == 2 and "is a directory" in json.loads(res.stdout)["error"]["message"]
    # the same inputs written to a good path: --fail-on is what exits 1
    res = run("diagnose", "--target", str(t), "--baseline", str(b), "-o", str(tmp_path / "r.md"),
              "--format", "markdown", "--fail-on", "misaligned")
    assert res.exit_code == 1 and (tmp_path / "r.md").read_text().strip()


def test_output_path_error_through_the_installed_entry_point(tmp_path):
    t = write(tmp_path / "t" / "train.log", megatron_log())
    res = subprocess.run([sys.executable, str(REPO / "cli.py"), "diagnose", "--target", str(t), "-o",
                          str(tmp_path / "nope" / "r.txt")], capture_output=True, text=True, timeout=300)
    assert res.returncode == 2
    assert res.stderr.strip().count("\n") == 0 and res.stderr.startswith("precdx: error:")


@pytest.mark.parametrize("args", [
    ["diagnose", "{tmp}/no-such-case"],
    ["diagnose", "--target", "{tmp}/no-such-run"],
    ["facts", "{tmp}/no-such-case"],
    ["inspect", "{tmp}/no-such-case"],
    ["explain", "NO-SUCH-RULE"],
    ["diagnose", "--facts", "{tmp}/missing.yaml"],
    ["diagnose", "{tmp}/no-such-case", "--engine", "nope"],   # a usage error, too
])
def test_fatal_errors_are_a_json_object_with_format_json(tmp_path, args):
    args = [a.format(tmp=tmp_path) for a in args]
    res = run(*args, "--format", "json")
    assert res.exit_code == 2, res.output
    err = json.loads(res.stdout)["error"]
    assert err["exit_code"] == 2 and err["message"]
    assert set(err) == {"message", "path", "line", "hint", "exit_code"}
    assert res.stderr.count("\n") == 1 and res.stderr.startswith("precdx: error: ")  # people still get the line
    text = run(*args)
    assert text.exit_code == 2 and not text.stdout.lstrip().startswith("{")


def test_format_equals_json_spelling_also_gives_json(tmp_path):
    res = run("diagnose", str(tmp_path / "none"), "--format=json")
    assert res.exit_code == 2 and json.loads(res.stdout)["error"]["path"] == str(tmp_path / "none")


# ------------------------------------------------------------------ demo --list, explain
def test_demo_list_is_a_table_not_python_reprs():
    from precdx.demo.catalogue import FAULTS

    res = run("demo", "--list")
    assert res.exit_code == 0
    assert "Fault(" not in res.stdout and "description=" not in res.stdout
    lines = res.stdout.splitlines()
    assert re.match(r"fault\s+failure mode\s+extra runs\s+description", lines[0])
    for name, fault in FAULTS.items():
        row = next(line for line in lines if line.startswith(name + " "))
        assert fault.failure_mode in row
    js = json.loads(run("demo", "--list", "--format", "json").stdout)
    assert [f["fault"] for f in js] == list(FAULTS)


def test_explain_is_case_insensitive():
    upper = run("explain", "CFG-001")
    lower = run("explain", "cfg-001")
    assert upper.exit_code == lower.exit_code == 0
    assert lower.stdout == upper.stdout and lower.stdout.startswith("CFG-001")
    mode = run("explain", "Operator.Precision_Defect")
    assert mode.exit_code == 0 and mode.stdout.startswith("operator.precision_defect")


# ------------------------------------------------------------------ inspect labels, README example
def _readme_declared_example() -> tuple[str, str]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("### Logs of other trainers", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```(yaml|text)\n(.*?)```", section, re.S)
    fmt = next(body for kind, body in blocks if kind == "yaml")
    log = next(body for kind, body in blocks if kind == "text")
    return fmt, log


def test_readme_declared_format_example_works_and_inspect_labels_it(tmp_path):
    fmt, log = _readme_declared_example()
    assert "precdx_log_formats" in yaml.safe_load(fmt)
    case = tmp_path / "case"
    write(case / "log_formats.yaml", fmt)
    write(case / "baseline" / "train.log", log)
    write(case / "target" / "train.log", log)
    res = run("inspect", str(case))
    assert res.exit_code == 0
    name = yaml.safe_load(fmt)["precdx_log_formats"][0]["name"]
    assert res.stdout.count(f"train.log: log [{name} (declared)]") == 2
    assert "env [" not in res.stdout  # KEY=VALUE-looking log lines are not an env listing
    out = json.loads(run("facts", str(case), "--format", "json").stdout)
    series = [f for f in out["facts"] if f["type"] == "loss_series"]
    assert len(series) == 2 and series[0]["framework"] == name and series[0]["n_points"] >= 3


def test_inspect_labels_the_msprobe_config(tmp_path):
    run_dir = tmp_path / "run"
    write(run_dir / "train.log", megatron_log())
    write(run_dir / "msprobe_config.json", json.dumps({
        "task": "statistics", "dump_path": "./dump", "rank": [], "step": [0], "level": "mix",
        "statistics": {"scope": [], "list": [], "data_mode": ["all"], "summary_mode": "statistics"}}, indent=2))
    write(run_dir / "other.json", json.dumps({"task": "unrelated"}))
    res = run("inspect", str(run_dir))
    assert "+ msprobe_config.json: msprobe.config [statistics/mix]" in res.stdout
    assert "- other.json: ignored" in res.stdout
    js = json.loads(run("inspect", str(run_dir), "--format", "json").stdout)
    kinds = {a["path"]: a["kind"] for a in js["runs"][0]["recognised"]}
    assert kinds["msprobe_config.json"] == "msprobe.config"


def test_inspect_accepts_one_file(tmp_path):
    f = write(tmp_path / "r" / "train.log.gz", gzip.compress(megatron_log().encode()))
    res = run("inspect", str(f))
    assert res.exit_code == 0 and "+ train.log.gz: log [megatron]" in res.stdout


def test_zst_log_without_zstandard_says_what_to_install(tmp_path, monkeypatch):
    zstandard = pytest.importorskip("zstandard", reason="needed to write the .zst file first")
    f = write(tmp_path / "run" / "train.log.zst", zstandard.ZstdCompressor().compress(megatron_log().encode()))
    monkeypatch.setitem(sys.modules, "zstandard", None)  # as if the extra were not installed
    res = run("facts", "--target", str(f.parent), "--format", "json")
    assert res.exit_code == 0
    out = json.loads(res.stdout)
    assert any("zstandard" in w["message"] and "precdx[zstd]" in w["message"] and w.get("path") == str(f)
               for w in out["warnings"])
    res = run("diagnose", "--target", str(f))
    assert res.exit_code == 2 and "zstandard" in res.stderr


@pytest.mark.parametrize("given", [None, "3"])
def test_the_command_starts_numpy_with_one_blas_thread_unless_told(given):
    """engine/cli.py: numpy loaded after the CLI module starts no OpenBLAS threads (they spin at
    start-up, taking CPU from the reader's threads); a value the user set is kept."""
    import os

    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if given is not None:
        env["OPENBLAS_NUM_THREADS"] = given
    code = ("import os, precdx.cli, numpy; tasks = '/proc/self/task'; "
            "print(os.environ['OPENBLAS_NUM_THREADS'], len(os.listdir(tasks)) if os.path.isdir(tasks) else 1)")
    setting, threads = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                      check=True).stdout.split()
    assert setting == (given or "1")
    if given is None:
        assert threads == "1"  # (the interpreter's own thread only)
