"""Commands are checked, not trusted (engine/rulepack/commands.py): the audit's invalid commands
are rejected, valid ones pass, and the committed msprobe snapshot matches the installed tool."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from precdx.rulepack.commands import check_command, check_text, framework_flag, msprobe_cli

ROOT = Path(__file__).resolve().parents[2]


def kinds(findings):
    return sorted({f.kind for f in findings})


@pytest.mark.parametrize("command, kind", [
    ("ascend-dmi -dg -i aicore,hbm,hccs -q", "tool"),          # aicore exclusive, hccs no item
    ("ascend-dmi -dg -i aicore,hbm -q", "tool"),
    ("ascend-dmi -dg -i aicore -sc 60 -q", "tool"),             # -sc without -s
    ("ascend-dmi -dg -i aicore -s -sc 500 -q", "tool"),
    ("msprobe compare -tp a -gp b --diff-analyze", "msprobe"),
    ("msprobe overflow_check -i dump/step0 --output out", "msprobe"),
    ("msprobe nan_analyze -i dump", "msprobe"),
    ("msprobe compare -tp a -gp b --consistent_check --backend torch", "msprobe"),
    ("export HCCL_INTRA_ROCE_ENABLE=off", "env_value"),
    ("export NCCL_DETERMINISTIC=1", "env"),
    ("export CUBLAS_WORKSPACE_CONFIG=4096", "env_value"),
    ("sed -i 's/ --use-fused-adam//' train.sh", "in_place"),
    ("echo '{\"task\": \"overflow_check\", \"level\": \"L1\"}' > config.json", "config"),
    ("echo '{\"task\": \"statistics\", \"level\": \"L3\"}' > config.json", "config"),
    ("echo '{\"task\": \"statistics\", \"statistics\": {\"summary_mode\": \"crc\"}}' > c.json", "config"),
    ("bash target_rerun/train.sh --use-fused-adam", "flag"),
    ("nvidia-smi -q -d ECC,RETIRED,PAGES", "tool"),
    ("dcgmi diag -r 5", "tool"),
])
def test_invalid_commands_are_rejected(command, kind):
    assert kind in kinds(check_command(command)), check_command(command)


@pytest.mark.parametrize("command", [
    "ascend-dmi -dg -i aicore -s -sc 60 -q",
    "ascend-dmi -dg -i hbm -s --auto-test -q",
    "msprobe compare -tp target_dump/step0 -gp bench_dump/step0 -o out -da",
    "msprobe config_check -d baseline/train.sh -o baseline_pack.zip && msprobe config_check -c a.zip b.zip -o out",
    "msprobe config_check --compare ckpt_a ckpt_b -o ckpt_similarity.json",
    "msprobe overflow_check -i ./dump/step3/ -o ./overflow_out",
    "msprobe graph_visualize -tp a -gp b -o graph_out -oc",
    "msprobe acc_check -api_info ./dump/step0/rank0/dump.json -o ./acc_check_out",
    "msprobe merge_result -i ./compare_out -o ./merged -config ./merge_config.yaml",
    "export HCCL_DETERMINISTIC=true LCCL_DETERMINISTIC=1",
    "export NCCL_ALGO=Ring NCCL_PROTO=Simple",
    "env -u INF_NAN_MODE_FORCE_DISABLE -u INF_NAN_MODE_ENABLE bash target_rerun/train.sh   # a copy",
    "CLOSE_MATMUL_K_SHIFT=1 bash target_rerun/train.sh",
    "nvidia-smi -q -d ECC,RETIRED_PAGES",
    "dcgmi diag -r 3",
    "npu-smi info -t ecc -i 0 -c 0",
    "from msprobe.pytorch import seed_all; seed_all(seed=1234, mode=True, rm_dropout=True)",
    "echo '{\"task\": \"tensor\", \"dump_path\": \"./d\", \"level\": \"L1\", \"step\": [{n.step}], "
    "\"tensor\": {\"list\": [\"{n.api_name}\"], \"data_mode\": [\"all\"]}}' > msprobe_config.json",
])
def test_valid_commands_pass(command):
    assert check_command(command) == []


def test_flags_in_text():
    assert kinds(check_text("drop --use-fused-adam and --use-distributed-optimizer")) == ["flag"]
    assert kinds(check_text("add --use-deter-comp")) == ["deprecated"]
    assert check_text("add --npu-deterministic (older releases called it --use-deter-comp, now deprecated)") == []
    assert check_text("use --grad-reduce-in-bf16 and --overlap-param-gather with --optimizer-selection") == []
    assert kinds(check_text("set HCCL_MAKE_IT_WORK to 1")) == ["env"]


def test_flag_versions_are_recorded():
    (fw, entry), = [x for x in framework_flag("--grad-reduce-in-bf16") if x[0] == "megatron"]
    assert entry["since"].startswith("core_v0.") and entry["deprecated_since"] is None
    deprecated = dict(framework_flag("--use-deter-comp"))
    assert deprecated["mindspeed_llm"]["deprecated_since"]


def test_msprobe_snapshot_is_26_2():
    cli = msprobe_cli()
    assert cli["version"] == "26.2.0"
    assert "overflow_check" not in cli["config_keys"]["task_names"]
    assert {"compare", "config_check", "overflow_check", "acc_check", "graph_visualize"} <= set(cli["subcommands"])


@pytest.mark.slow  # runs the installed msprobe's --help for every subcommand
@pytest.mark.skipif(importlib.util.find_spec("msprobe") is None, reason="mindstudio-probe not installed "
                    "(the committed snapshot is what the lint uses)")
def test_committed_msprobe_snapshot_matches_the_installed_tool():
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "msprobe_cli_snapshot.py"), "--check"],
                          capture_output=True, text=True, timeout=300)
    if "mindstudio-probe" in proc.stderr and proc.returncode == 1 and "stale" not in proc.stderr:
        pytest.skip(proc.stderr[-200:])
    assert proc.returncode == 0, proc.stderr[-500:]
