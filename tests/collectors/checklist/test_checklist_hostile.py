"""Hostile launch scripts and configs: resource bounds of the shell reader (doubling bombs, deep
nesting), unterminated here-documents, command substitution reported, strict YAML for configs,
numbers and nesting beyond what json/tomllib accept, binary files named like configs."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from precdx.collectors.checklist.configfiles import ConfigFileError, load
from precdx.collectors.checklist.evals import read_metrics
from precdx.collectors.checklist.shell import MAX_VALUE_CHARS, ShellLimitError, read_script
from precdx.errors import Warnings

from .conftest import GPU_ENV, NPU_ENV, collect_dir, write_case

TRAIN = "torchrun --nproc_per_node 8 pretrain_gpt.py --lr 3e-4 --seed 1\n"


def test_string_doubling_stops_at_the_bound_and_keeps_what_came_before() -> None:
    script = read_script("KEEP=1\nA=xxxxxxxx\n" + "A=$A$A\n" * 200 + TRAIN)
    assert isinstance(script.error, ShellLimitError) and "characters" in str(script.error)
    assert script.variables["KEEP"] == "1"
    assert len(script.variables["A"]) <= MAX_VALUE_CHARS
    assert script.error.line == 2 + 18  # 8 * 2**17 = 1 MiB; the 18th doubling crosses it


def test_array_doubling_and_many_references_in_one_word_are_bounded() -> None:
    arrays = read_script("A=(x x x x)\n" + 'A=("${A[@]}" "${A[@]}")\n' * 60 + TRAIN)
    assert isinstance(arrays.error, ShellLimitError)
    one_word = read_script("A=" + "y" * 100_000 + "\nB=" + "$A" * 100 + "\n" + TRAIN)
    assert isinstance(one_word.error, ShellLimitError) and one_word.error.line == 2


def test_deep_nesting_is_an_error_not_a_crash() -> None:
    deep = read_script("X=" + "${A:-" * 3000 + "1" + "}" * 3000 + "\n" + TRAIN)
    assert isinstance(deep.error, ShellLimitError) and "nested too deeply" in str(deep.error)
    arith = read_script("N=$((" + "+".join(["1"] * 20_000) + "))\nM=$((2*3))\n" + TRAIN)
    assert arith.error is None and arith.variables["M"] == "6"
    assert arith.variables["N"].startswith("$((")  # not evaluable: kept as written


def test_unterminated_here_document_is_reported_at_its_start() -> None:
    script = read_script("A=1\ncat > x.yaml <<EOF\nlr: 1\n" + TRAIN)
    assert script.error is not None and script.error.line == 2 and "here-document" in str(script.error)
    assert script.variables == {"A": "1"}
    closed = read_script("cat > x.yaml <<EOF\r\nlr: 1\r\nEOF\r\n" + TRAIN)
    assert closed.error is None and closed.commands[-1].argv[0] == "torchrun"


def test_command_substitution_is_reported_and_never_run(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    script = (f"#!/bin/bash\nSEED=$(touch {marker}; echo 7)\nLR=`touch {marker}`\n"
              "torchrun --nproc_per_node 8 pretrain_gpt.py --seed $SEED --lr $LR --train-iters $((2*5))\n")
    write_case(tmp_path / "case", {"baseline": {"pretrain_gpt.sh": TRAIN, "env.txt": GPU_ENV},
                                   "target": {"pretrain_gpt.sh": script, "env.txt": NPU_ENV}})
    facts, warnings, _ = collect_dir(tmp_path / "case")
    assert not marker.exists()
    said = [w for w in warnings if w.get("path", "").endswith("target/pretrain_gpt.sh")]
    assert [w["message"] for w in said] == [
        "training arguments come from command substitution ($(...) or `...`); precdx never runs commands, "
        "so these values are compared as written"]
    baseline_only = [w for w in warnings if w.get("path", "").endswith("baseline/pretrain_gpt.sh")]
    assert baseline_only == []  # $((arithmetic)) alone is not a command substitution


def test_binary_launch_script_and_configs_are_reported(tmp_path: Path) -> None:
    junk = b"\x00\x01\xff" * 100
    write_case(tmp_path / "case", {"baseline": {"pretrain_gpt.sh": TRAIN},
                                   "target": {"pretrain_gpt.sh": junk, "train_config.toml": junk,
                                              "train_config.yaml": junk}})
    _, warnings, _ = collect_dir(tmp_path / "case")
    by_name = {Path(w["path"]).name: w["message"] for w in warnings if "path" in w}
    assert by_name["pretrain_gpt.sh"].startswith("launch script is binary")
    assert by_name["train_config.toml"].startswith("TOML config could not be read (not UTF-8 text)")
    assert by_name["train_config.yaml"].startswith("YAML config could not be read (not UTF-8 text)")


@pytest.mark.parametrize("text, reason", [
    ("lr: 1\nseed: 2\nlr: 3\n", "duplicate key 'lr' (first at line 1)"),
    ("a: &a {x: 1, y: 1, z: 1}\n" + "".join(f"b{i}: &b{i} {{p: *{'a' if i == 0 else f'b{i - 1}'}, "
                                             f"q: *{'a' if i == 0 else f'b{i - 1}'}}}\n" for i in range(25)),
     "refusing a possible alias bomb"),
    ("loop: &l {self: *l}\n", "recursive node"),
    ("cb: !!python/object/apply:os.system [id]\n", "YAML construct not allowed"),
    ("lr: " + "9" * 5000 + "\n", "integer string conversion"),
])
def test_yaml_configs_are_read_strictly(tmp_path: Path, text: str, reason: str) -> None:
    path = tmp_path / "train_config.yaml"
    path.write_text(text)
    with pytest.raises(ConfigFileError) as info:
        load(path, "yaml")
    assert reason in str(info.value)


@pytest.mark.parametrize("fmt, text, reason", [
    ("json", '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deeply"),
    ("json", '{"a": ' + "9" * 5000 + "}", "integer string conversion"),
    ("json", '{"a": ' + '{"b": ' * 200 + "1" + "}" * 200 + "}", "nested more than 64 levels"),
    ("toml", "a = " + "[" * 5000 + "]" * 5000 + "\n", "nested too deeply"),
    ("toml", "a = " + "9" * 5000 + "\n", "integer string conversion"),
])
def test_json_and_toml_limits_are_config_errors(tmp_path: Path, fmt: str, text: str, reason: str) -> None:
    path = tmp_path / f"config.{fmt}"
    path.write_text(text)
    with pytest.raises(ConfigFileError) as info:
        load(path, fmt)
    assert reason in str(info.value)


def test_eval_numbers_beyond_float_range_and_files_without_metrics(tmp_path: Path) -> None:
    huge = tmp_path / "eval.json"
    huge.write_text('{"eval_loss": ' + "9" * 400 + ', "eval_accuracy": -' + "9" * 400 + "}")
    w = Warnings()
    assert read_metrics(huge, w) == {"eval_loss": math.inf, "eval_accuracy": -math.inf} and not list(w)
    nothing = tmp_path / "none.json"
    nothing.write_text(json.dumps({"eval_loss": "low", "eval_accuracy": [1]}))
    assert read_metrics(nothing, w) is None
    assert [x["message"] for x in w] == ["evaluation file holds no numeric metrics; nothing to compare"]
    deep = tmp_path / "deep.json"
    deep.write_text('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}")
    assert read_metrics(deep, w) is None and "nested too deeply" in list(w)[-1]["message"]
