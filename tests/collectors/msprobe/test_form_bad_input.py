"""Bad input the evidence forms bring (issue 14): bool statistics are valid values, an empty
dump.json and a cyclic construct.json are named in the warnings, a YAML file refused for safety
is named instead of silently ignored."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from precdx.collectors.msprobe.context import module_paths
from precdx.collectors.msprobe.tasks import DumpTask, run_task
from precdx.discovery import discover_case
from precdx.errors import Warnings

BASE = "02_dump_mix_statistics/dump_path/step0/rank0"


def _mask_dump(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    mask = {"type": "torch.Tensor", "dtype": "torch.bool", "shape": [1, 1, 4, 4], "Max": True,
            "Min": False, "Mean": None, "Norm": None, "requires_grad": False}
    x = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [1, 1, 4, 4], "Max": 1.5,
         "Min": -1.0, "Mean": 0.1, "Norm": 3.0, "requires_grad": False}
    data = {"Tensor.masked_fill.0.forward": {
        "input_args": [x, mask, {"type": "float", "value": float("-inf")}], "input_kwargs": {},
        "output": [dict(x, Min=float("-inf"), Mean=float("-inf"), Norm=float("inf"))]}}
    path.write_text(json.dumps({"task": "statistics", "level": "L1", "framework": "pytorch",
                                "dump_data_dir": None, "data": data}))


def test_bool_statistics_are_valid_values(tmp_path: Path) -> None:
    a, b = tmp_path / "a/step0/rank0/dump.json", tmp_path / "b/step0/rank0/dump.json"
    _mask_dump(a)
    _mask_dump(b)
    rep = run_task(DumpTask(str(a), str(b)))
    assert rep.fatal is None and rep.warnings == []
    assert rep.n_compared == 1 and rep.first is None


def test_real_masked_fill_dumps_do_not_warn(scenarios: Path) -> None:
    dump = scenarios / "case-01/target/msprobe_dump/step0/rank0/dump.json"
    assert b'"Max": true' in dump.read_bytes()
    rep = run_task(DumpTask(str(dump)))
    assert rep.fatal is None and not [m for m, _ in rep.warnings if "not numbers" in m]


def test_empty_dump_json_is_named(tmp_path: Path) -> None:
    for role in ("target", "baseline"):
        (tmp_path / role / "dump/step0/rank0").mkdir(parents=True)
    (tmp_path / "target/dump/step0/rank0/dump.json").write_bytes(b"")
    (tmp_path / "baseline/dump/step0/rank0/dump.json").write_text("{}")
    w = Warnings()
    discover_case(tmp_path, warnings=w)
    assert any(x["path"].endswith("target/dump/step0/rank0/dump.json") and "empty" in x["message"] for x in w)
    rep = run_task(DumpTask(str(tmp_path / "baseline/dump/step0/rank0/dump.json")))
    assert any("no entries" in m and p.endswith("baseline/dump/step0/rank0/dump.json") for m, p in rep.warnings)


def test_cyclic_construct_json_is_named(tmp_path: Path) -> None:
    construct = tmp_path / "construct.json"
    construct.write_text(json.dumps({"Functional.linear.0.forward": "Tensor.add.0.forward",
                                     "Tensor.add.0.forward": "Functional.linear.0.forward",
                                     "Functional.gelu.0.forward": "Module.mlp.MLP.forward.0",
                                     "Module.mlp.MLP.forward.0": "Module.block.Block.forward.0",
                                     "Module.block.Block.forward.0": "Module.mlp.MLP.forward.0"}))
    w = Warnings()
    paths = module_paths(construct, ["Functional.linear.0.forward", "Functional.gelu.0.forward",
                                     "Tensor.add.0.forward"], w)
    assert paths == {"Functional.gelu.0.forward": "mlp"}
    msgs = [x for x in w if x["path"] == str(construct)]
    assert len(msgs) == 1 and "cycle" in msgs[0]["message"] and ".forward -> " in msgs[0]["message"]


def test_cyclic_construct_json_in_a_dump_folder(samples: Path, tmp_path: Path) -> None:
    folder = tmp_path / "step0/rank0"
    shutil.copytree(samples / "13_nan_overflow/dump_path/step0/rank0", folder)
    attn, block = "Module.block.attn.Attention.forward.0", "Module.block.Block.forward.0"
    (folder / "construct.json").write_text(json.dumps({"Tensor.__mul__.1.forward": None,
                                                       attn: block, block: attn}))
    rep = run_task(DumpTask(str(folder / "dump.json")))
    assert rep.run.first_nan.api == "Tensor.__mul__.1.forward"
    assert any("cycle" in m and p.endswith("construct.json") for m, p in rep.warnings)


_BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n" for p, n in zip("abcdef", "bcdefg"))


def test_yaml_refused_for_safety_is_named(tmp_path: Path) -> None:
    for role in ("target", "baseline"):
        (tmp_path / role).mkdir()
        (tmp_path / role / "train.log").write_text("iteration 1/ 10 | lm loss: 1.0E+01 |\n")
    (tmp_path / "target/data_mapping.yaml").write_text(_BOMB)
    (tmp_path / "target/layer_mapping.yml").write_text("x: !!python/object/apply:os.system [echo]\n")
    (tmp_path / "target/plain.yaml").write_text("x: 1\n")
    w = Warnings()
    discover_case(tmp_path, warnings=w)
    by_path = {Path(x["path"]).name: x["message"] for x in w if x.get("path")}
    assert "alias bomb" in by_path["data_mapping.yaml"] and "refused for safety" in by_path["data_mapping.yaml"]
    assert "python/object" in by_path["layer_mapping.yml"]
    assert "plain.yaml" not in by_path
