"""The probe writes msprobe 26.2.0's layout, names and statistics."""
from __future__ import annotations

import json
import math
import re
import sys

import pytest

torch = pytest.importorskip("torch")

from precdx.errors import PrecdxError  # noqa: E402
from precdx.probe import Probe  # noqa: E402
from tests.probe.tiny_models import TinyLM, make_step  # noqa: E402

NAME = re.compile(r"^(?:(Functional|Torch|Tensor)\.[\w]+\.\d+\.(forward|backward)"
                  r"|Module\.[\w.]+\.[A-Za-z_]\w*\.(forward|backward|parameters_grad)\.\d+)$")


def _dump(tmp_path, level="mix", mode="statistics", steps=2):
    torch.manual_seed(0)
    model = TinyLM()
    step = make_step(model)
    probe = Probe(model, tmp_path / "dump", level=level, summary_mode=mode, rank=0)
    for _ in range(steps):
        with probe.capture():
            step()
    return model, probe


def _load(path):
    return json.loads(path.read_text())


def test_layout_top_level_and_names(tmp_path, shared_dir):
    _dump(tmp_path)
    for step in (0, 1):
        d = tmp_path / "dump" / f"step{step}" / "rank0"
        assert sorted(p.name for p in d.iterdir()) == ["construct.json", "dump.json", "stack.json"]
        dump = _load(d / "dump.json")
        assert list(dump) == ["task", "level", "framework", "dump_data_dir", "data"]
        assert (dump["task"], dump["level"], dump["framework"], dump["dump_data_dir"]) == \
            ("statistics", "mix", "pytorch", None)
        assert all(NAME.match(k) for k in dump["data"]), [k for k in dump["data"] if not NAME.match(k)]
    # counters restart every step, like msprobe's
    keys0 = list(_load(tmp_path / "dump/step0/rank0/dump.json")["data"])
    keys1 = list(_load(tmp_path / "dump/step1/rank0/dump.json")["data"])
    assert keys0 == keys1
    sample = _load(shared_dir / "msprobe-samples/02_dump_mix_statistics/dump_path/step0/rank0/dump.json")
    assert list(sample) == list(_load(tmp_path / "dump/step0/rank0/dump.json"))


def test_entry_bodies_match_sample_shapes(tmp_path, shared_dir):
    _dump(tmp_path, steps=1)
    ours = _load(tmp_path / "dump/step0/rank0/dump.json")["data"]
    sample = _load(shared_dir / "msprobe-samples/02_dump_mix_statistics/dump_path/step0/rank0/dump.json")["data"]
    # the sample model and ours share these entries; the body keys must be identical
    for name in ("Functional.embedding.0.forward", "Functional.layer_norm.0.forward",
                 "Functional.linear.0.forward", "Torch.matmul.0.forward", "Tensor.__truediv__.0.forward",
                 "Functional.softmax.0.forward", "Functional.cross_entropy.0.forward",
                 "Functional.linear.1.backward", "Functional.layer_norm.0.backward",
                 "Functional.embedding.0.backward"):
        assert list(ours[name]) == list(sample[name]), name
        assert len(ours[name].get("input_args", ours[name].get("input"))) == \
            len(sample[name].get("input_args", sample[name].get("input"))), name
    assert ours["Functional.softmax.0.forward"]["input_kwargs"] == {"dim": {"type": "int", "value": -1}}
    ln_args = ours["Functional.layer_norm.0.forward"]["input_args"]
    assert ln_args[1] == [{"type": "int", "value": 16}] and ln_args[4] == {"type": "float", "value": 1e-05}
    ids = ours["Functional.embedding.0.forward"]["input_args"][0]
    assert ids["dtype"] == "torch.int64" and ids["Mean"] is None and ids["Norm"] is None
    assert isinstance(ids["Max"], int)
    assert list(ours["Module.head.Linear.forward.0"]) == ["input_args", "input_kwargs", "output", "parameters"]
    assert list(ours["Module.attn.Attn.forward.0"]["parameters"]) == []
    grads = ours["Module.head.Linear.parameters_grad.0"]
    assert set(grads) == {"weight", "bias"} and grads["weight"][0]["requires_grad"] is False
    # backward outputs follow the autograd node, e.g. the scalar divisor gives a null
    assert ours["Tensor.__truediv__.0.backward"]["output"][1] is None
    assert ours["Module.emb.Embedding.backward.0"]["output"] == []


def test_stats_equal_msprobe_for_a_real_sample_tensor(shared_dir):
    from precdx.probe.summary import tensor_summary
    base = shared_dir / "msprobe-samples/04_dump_L1_tensor/dump_path/step0/rank0"
    dump = _load(base / "dump.json")["data"]["Functional.softmax.0.forward"]
    for role, leaf in (("input.0", dump["input_args"][0]), ("output.0", dump["output"][0])):
        t = torch.load(base / "dump_tensor_data" / f"Functional.softmax.0.forward.{role}.pt")
        ours = tensor_summary(t.requires_grad_(True))
        for key in ("type", "dtype", "shape", "requires_grad"):
            assert ours[key] == leaf[key]
        for key in ("Max", "Min", "Mean", "Norm"):
            assert ours[key] == pytest.approx(leaf[key], rel=1e-6, abs=1e-9), (role, key)
    md5 = _load(shared_dir / "msprobe-samples/05_dump_md5/dump_path/step0/rank0/dump.json")["data"]
    t = torch.load(base / "dump_tensor_data/Functional.softmax.0.forward.input.0.pt")
    assert tensor_summary(t, "md5")["md5"] == md5["Functional.softmax.0.forward"]["input_args"][0]["md5"]


def test_construct_and_stack(tmp_path):
    _dump(tmp_path, steps=1)
    d = tmp_path / "dump/step0/rank0"
    construct = _load(d / "construct.json")
    assert construct["Functional.linear.0.forward"] == "Module.attn.qkv.Linear.forward.0"
    assert construct["Module.attn.qkv.Linear.forward.0"] == "Module.attn.Attn.forward.0"
    assert construct["Module.attn.Attn.forward.0"] is None
    assert construct["Functional.linear.0.backward"] == "Module.attn.qkv.Linear.backward.0"
    # shape ops: in construct.json (mix) but not dump.json (FOCUS risk level)
    assert "Tensor.transpose.0.forward" in construct
    assert "Tensor.transpose.0.forward" not in _load(d / "dump.json")["data"]
    stack = _load(d / "stack.json")
    names = [n for _, (group, _frames) in sorted(stack.items(), key=lambda kv: int(kv[0])) for n in group]
    assert "Torch.matmul.0.forward" in names and not any(n.endswith("backward") for n in names)
    frames = next(f for g, f in stack.values() if "Functional.softmax.0.forward" in g)
    assert frames[0].startswith("File ") and "tiny_models.py" in frames[0] and "F.softmax" in frames[0]
    assert not any(f"{folder}/probe/" in f for f in frames for folder in ("engine", "precdx"))  # the probe's own frames


def test_levels_and_md5(tmp_path):
    _dump(tmp_path / "l1", level="L1", steps=1)
    d = tmp_path / "l1/dump/step0/rank0"
    assert _load(d / "construct.json") == {}
    assert not any(k.startswith("Module.") for k in _load(d / "dump.json")["data"])
    _dump(tmp_path / "l0", level="L0", steps=1)
    data = _load(tmp_path / "l0/dump/step0/rank0/dump.json")["data"]
    assert data and all(k.startswith("Module.") for k in data)
    _dump(tmp_path / "md5", mode="md5", steps=1)
    leaf = _load(tmp_path / "md5/dump/step0/rank0/dump.json")["data"]["Functional.gelu.0.forward"]["output"][0]
    assert re.fullmatch(r"[0-9a-f]{8}", leaf["md5"]) and "Norm" in leaf


def test_nan_written_as_bare_json_tokens(tmp_path):
    probe = Probe(None, tmp_path, level="L1", rank=None)
    with probe.capture():
        torch.log(torch.tensor([0.0, 1.0]))
        torch.log(torch.tensor([-1.0, 1.0]))
    text = next(tmp_path.glob("step0/proc*/dump.json")).read_text()
    assert "NaN" in text and "-Infinity" in text
    data = json.loads(text)["data"]
    assert data["Torch.log.0.forward"]["output"][0]["Min"] == float("-inf")
    assert math.isnan(data["Torch.log.1.forward"]["output"][0]["Mean"])


def test_idle_probe_patches_nothing():
    import torch.nn.functional as F
    before = (F.gelu, torch.matmul, torch.Tensor.__dict__.get("__add__"))
    model = TinyLM()
    probe = Probe(model, None, steps=[3])
    with probe.capture():  # step 0 is not wanted: nothing installed
        assert (F.gelu, torch.matmul, torch.Tensor.__dict__.get("__add__")) == before
        assert not model._forward_pre_hooks
    probe.current_step = 3
    with probe.capture():
        assert F.gelu is not before[0] and model.emb._forward_pre_hooks
    assert (F.gelu, torch.matmul, torch.Tensor.__dict__.get("__add__")) == before
    assert not model.emb._forward_pre_hooks and not model.emb._backward_hooks


def test_user_errors_are_precdx_errors(tmp_path):
    with pytest.raises(PrecdxError):
        Probe(TinyLM(), tmp_path, level="L2")
    with pytest.raises(PrecdxError):
        Probe(None, tmp_path, level="mix")


def test_import_engine_probe_and_demo_without_torch():
    import subprocess
    code = ("import sys, builtins\n"
            "real = builtins.__import__\n"
            "def guard(name, *a, **k):\n"
            "    if name == 'torch' or name.startswith('torch.'):\n"
            "        raise ImportError('torch blocked')\n"
            "    return real(name, *a, **k)\n"
            "builtins.__import__ = guard\n"
            "import precdx, precdx.probe, precdx.demo\n"
            "assert 'operator_defect' in precdx.demo.FAULTS and precdx.demo.DEFAULT_FAULT\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=str(__import__("pathlib").Path(__file__).parents[2]))
