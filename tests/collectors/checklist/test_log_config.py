"""Logs as config: what the training log echoes at start-up becomes the run's settings (argument
dumps, DeepSpeed/HF/torchtitan echoes, single lines), merged under canonical names below launch
scripts and config files; framework defaults for keys one side leaves unset; DeepSpeed 'auto'."""
from __future__ import annotations

from pathlib import Path

import pytest

from precdx.collectors.base import Case, RunDir
from precdx.collectors.checklist import COLLECTOR, defaults
from precdx.collectors.logs import COLLECTOR as LOGS
from precdx.collectors.logs.configecho import py_value, read_log_info, split_top_level
from precdx.errors import Warnings

from .conftest import NPU_ENV, GPU_ENV, of, one


def _log_run(role: str, path: Path, name: str | None = None) -> RunDir:
    """A run that has nothing but its training log (the scenario file, read in place)."""
    art = LOGS.sniff(path, path.read_bytes()[:65536])
    assert art is not None and art.kind == "log"
    return RunDir(role=role, name=name or role, root=path.parent, artefacts=[art])


def _collect(*runs: RunDir):
    w = Warnings()
    return list(COLLECTOR.collect(Case(runs=list(runs)), w)), w


# ------------------------------------------------------------------ Megatron / MindSpeed argument dump
def test_megatron_argument_dump_is_the_runs_config(shared_dir):
    case = shared_dir / "scenarios" / "case-04"
    facts, w = _collect(_log_run("baseline", case / "baseline" / "train.log"),
                        _log_run("target", case / "target" / "train.log"))
    lr = one(facts, "config_diff", name="lr")
    assert (lr.baseline, lr.target, lr.category, lr.relevant, lr.from_log) == ("0.0003", "0.003", "hyperparameter",
                                                                              True, True)
    # every other difference is a path at another mount point or a MindSpeed-only argument
    assert [d.name for d in of(facts, "config_diff") if d.relevant] == ["lr"]
    summary = one(facts, "config_summary", pair="target~baseline")
    assert (summary.n_relevant, summary.only_category, summary.names) == (1, "hyperparameter", "lr")
    assert one(facts, "config_value", role="target", name="seq_length").value == "64"
    status = one(facts, "determinism_status", role="target")
    assert status.seed == "1234" and status.dropout_off is True


def test_a_fused_switch_only_the_target_framework_has_is_a_difference_when_on(shared_dir, tmp_path):
    """MindSpeed echoes use_fused_rmsnorm, Megatron (the GPU baseline) has no such argument. Off
    (case-01's echo) that is no difference; switched on, the baseline cannot be running that
    fused kernel, so it is one (a relevant framework option, presence target_only). Another
    MindSpeed-only argument that is not a framework option stays out either way."""
    case = shared_dir / "scenarios" / "case-01"
    base = _log_run("baseline", case / "baseline" / "train.log")
    facts, _ = _collect(base, _log_run("target", case / "target" / "train.log"))
    assert not of(facts, "config_diff", name="use_fused_rmsnorm")
    text = (case / "target" / "train.log").read_text()
    on = text.replace("use_fused_rmsnorm ............................... False",
                      "use_fused_rmsnorm ............................... True")
    on = on.replace("is_instruction_dataset .......................... False",
                    "is_instruction_dataset .......................... True")
    assert on.count("True") >= text.count("True") + 2
    (tmp_path / "target").mkdir()
    (tmp_path / "target" / "train.log").write_text(on)
    facts, _ = _collect(base, _log_run("target", tmp_path / "target" / "train.log"))
    d = one(facts, "config_diff", name="use_fused_rmsnorm")
    assert (d.category, d.presence, d.relevant, d.target, d.from_log) == ("framework_option", "target_only", True,
                                                                          "true", True)
    assert not of(facts, "config_diff", name="is_instruction_dataset")


def test_aliased_keys_of_one_dump_are_or_ed(shared_dir):
    """MindSpeed prints deterministic_mode False next to use_deter_comp True: deterministic."""
    case = shared_dir / "scenarios" / "case-06"
    facts, _ = _collect(_log_run("baseline", case / "baseline" / "train.log"),
                        _log_run("target", case / "target" / "train.log"))
    assert one(facts, "config_value", role="target", name="deterministic_mode").flag is True
    assert not of(facts, "config_diff", name="deterministic_mode")


def test_checkpoint_iteration_and_seed_lines(shared_dir):
    c05, c11 = shared_dir / "scenarios" / "case-05", shared_dir / "scenarios" / "case-11"
    facts, _ = _collect(_log_run("baseline", c05 / "baseline" / "train.log"),
                        _log_run("target", c05 / "target" / "train.log"))
    it = one(facts, "config_diff", name="load_iteration")
    assert (it.baseline, it.target, it.category, it.relevant) == ("500", "150", "model", True)
    facts, _ = _collect(_log_run("target", c11 / "target" / "train.log"),
                        _log_run("target_rerun", c11 / "target_rerun" / "train.log"))
    seed = one(facts, "config_diff", pair="target_rerun~target", name="seed")
    assert (seed.baseline, seed.target) == ("9183", "27701")


def test_launch_script_wins_and_disagreement_is_warned(tmp_path):
    log = ("------------------------ arguments ------------------------\n"
           "  lr .............................................. 0.0003\n"
           "  seed ............................................ 1234\n"
           "  hidden_dropout .................................. 0.0\n"
           "-------------------- end of arguments ---------------------\n"
           " iteration        1/      10 | learning rate: 3.0E-04 | global batch size:     8 | lm loss: 2.5E+00 |"
           " loss scale: 1.0 | grad norm: 1.7 | number of skipped iterations:   0 | number of nan iterations:   0 |\n")
    script = "#!/bin/bash\ntorchrun --nproc_per_node 8 pretrain_gpt.py --lr 1e-4 --micro-batch-size 1\n"
    d = tmp_path / "target"
    d.mkdir()
    (d / "train.log").write_text(log)
    (d / "pretrain_gpt.sh").write_text(script)
    from precdx.discovery import discover_runs
    w = Warnings()
    case = discover_runs(target=d, warnings=w)
    facts = list(COLLECTOR.collect(case, w))
    assert one(facts, "config_value", name="lr").value == "1e-4"           # the script's value
    assert one(facts, "config_value", name="hidden_dropout").value == "0.0"  # the log fills the gap
    msgs = [x["message"] for x in w.items]
    assert any("'lr' is 1e-4" in m and "echoes 0.0003" in m for m in msgs), msgs


# ------------------------------------------------------------------ other echo formats
DS_ECHO = """\
[2024-05-01 10:00:00,000] [INFO] [config.py:997:print] DeepSpeedEngine configuration:
[2024-05-01 10:00:00,000] [INFO] [config.py:1001:print]   bfloat16_enabled ............. True
[2024-05-01 10:00:00,000] [INFO] [config.py:1001:print]   gradient_clipping ............ 0.5
[2024-05-01 10:00:00,000] [INFO] [config.py:1001:print]   zero_optimization_stage ...... 2
[2024-05-01 10:00:00,000] [INFO] [config.py:1001:print]   json = {
    "bf16":{
        "enabled":true
    },
    "optimizer":{
        "type":"AdamW",
        "params":{
            "lr":2e-05,
            "betas":[0.9, 0.95]
        }
    },
    "train_micro_batch_size_per_gpu":4
}
[2024-05-01 10:00:01,000] [INFO] [engine.py:100:step] step=1
"""
HF_ECHO = """\
[INFO|configuration_utils.py:800] 2024-05-01 10:00:00,000 >> Model config LlamaConfig {
  "hidden_size": 64,
  "rms_norm_eps": 1e-06,
  "rope_theta": 500000.0,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.44.2",
  "vocab_size": 32000
}

Training/evaluation parameters TrainingArguments(
adam_beta2=0.95,
fp16=True,
learning_rate=0.0001,
lr_scheduler_type=SchedulerType.COSINE,
max_grad_norm=1.0,
output_dir=./out,
seed=7,
)
[INFO|trainer.py:2128] 2024-05-01 10:00:05,000 >> ***** Running training *****
[INFO|trainer.py:2134] 2024-05-01 10:00:05,000 >>   Total train batch size (w. parallel, distributed & accumulation) = 64
[INFO|trainer.py:2137] 2024-05-01 10:00:05,000 >>   Number of trainable parameters = 1,234,567
[INFO|trainer.py:626] 2024-05-01 10:00:05,000 >> FSDP enabled
"""
TITAN_ECHO = ("[rank0]:[titan] 2025-01-01 10:00:00,000 - root - INFO - Running with args: {'job': {'config_file': "
              "'x.toml'}, 'optimizer': {'name': 'AdamW', 'lr': 0.0008, 'eps': 1e-08}, 'training': {'seq_len': 2048, "
              "'seed': None}, 'parallelism': {'tensor_parallel_degree': 2}}\n")


def test_echo_formats(tmp_path):
    p = tmp_path / "ds.log"
    p.write_text(DS_ECHO)
    ds = read_log_info(p).settings
    assert (ds["bf16"].value, ds["gradient_clipping"].value, ds["zero_stage"].value) == (True, 0.5, 2)
    assert ds["optimizer.params.betas"].value == [0.9, 0.95] and ds["train_micro_batch_size_per_gpu"].value == 4
    p = tmp_path / "hf.log"
    p.write_text(HF_ECHO)
    info = read_log_info(p)
    hf = info.settings
    assert hf["checkpoint_dtype"].value == "bfloat16" and hf["rope_theta"].value == 500000.0
    assert hf["learning_rate"].value == 0.0001 and hf["lr_scheduler_type"].value == "cosine"
    assert hf["fp16"].value is True and hf["total_train_batch_size"].value == 64
    assert hf["num_trainable_parameters"].value == 1234567 and hf["fsdp"].value is True
    assert info.versions["transformers"][0] == "4.44.2" and info.framework_hint == "hf_trainer"
    p = tmp_path / "titan.log"
    p.write_text(TITAN_ECHO)
    tt = read_log_info(p).settings
    assert tt["optimizer.lr"].value == 0.0008 and tt["parallelism.tensor_parallel_degree"].value == 2
    assert "training.seed" not in tt  # None is "not set"


def test_echo_value_grammar():
    assert py_value("['/data/a', '/data/b']") == ["/data/a", "/data/b"]
    assert py_value("<IntervalStrategy.STEPS: 'steps'>") == "steps"
    assert py_value("torch.bfloat16") == "torch.bfloat16" and py_value("None") is None
    assert split_top_level("a=1, b=[1, 2], c='x, y', d=F(e=1, f=2)") == ["a=1", "b=[1, 2]", "c='x, y'", "d=F(e=1, f=2)"]


def test_hf_log_becomes_settings_with_checkpoint_dtype(tmp_path):
    d = tmp_path / "target"
    d.mkdir()
    (d / "train.log").write_text(HF_ECHO + "{'loss': 2.5, 'grad_norm': 1.2, 'learning_rate': 1e-4, 'epoch': 0.1}\n")
    facts, w = _collect(_log_run("target", d / "train.log"))
    assert one(facts, "config_value", name="checkpoint_dtype").value == "bfloat16"
    assert one(facts, "config_value", name="fp16").flag is True
    assert one(facts, "config_value", name="lr").value == "0.0001"
    assert one(facts, "config_value", name="global_batch_size").value == "64"
    assert one(facts, "config_value", name="fsdp").flag is True


def test_unreadable_and_binary_logs_give_no_settings(tmp_path):
    p = tmp_path / "bin.log"
    p.write_bytes(b"\x00\x01" * 1000)
    assert read_log_info(p).settings == {}
    info = read_log_info(tmp_path / "missing.log")
    assert info.settings == {} and "cannot read" in info.problems[0][0]
    p = tmp_path / "cut.log"
    p.write_text("------------------------ arguments ------------------------\n  lr ....... 0.1\n")
    info = read_log_info(p)
    assert info.settings["lr"].value == 0.1 and "no end line" in info.problems[0][0]


# ------------------------------------------------------------------ versions and device
def test_versions_and_device_from_log_lines(tmp_path):
    log = ("host:1:1 [0] NCCL INFO NCCL version 2.18.5+cuda12.2\n"
           "[2024-01-01] [INFO] DeepSpeed info: version=0.14.2, git-hash=unknown, git-branch=unknown\n"
           "torch version .................... 2.1.0+cu121\n")
    p = tmp_path / "gpu.log"
    p.write_text(log)
    info = read_log_info(p)
    assert info.versions["nccl"][0] == "2.18.5+cuda12.2" and info.versions["cuda"][0] == "12.2"
    assert info.versions["deepspeed"][0] == "0.14.2" and info.versions["torch"][0] == "2.1.0+cu121"
    assert info.device == "gpu"


def test_device_from_a_scenario_npu_log(shared_dir):
    from precdx.collectors.checklist.runs import guess_device
    run = _log_run("target", shared_dir / "scenarios" / "case-04" / "target" / "train.log")
    assert guess_device(run) == "npu"


def test_log_versions_compared_only_where_both_logs_print_them(tmp_path):
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    a.write_text("DeepSpeed info: version=0.14.2, git-hash=x\nCANN version: 8.0.RC2\n"
                 "{'loss': 2.5, 'grad_norm': 1.0, 'learning_rate': 1e-4, 'epoch': 0.1}\n")
    b.write_text("DeepSpeed info: version=0.15.0, git-hash=x\n"
                 "{'loss': 2.5, 'grad_norm': 1.0, 'learning_rate': 1e-4, 'epoch': 0.1}\n")
    facts, _ = _collect(_log_run("baseline", b), _log_run("target", a))
    diffs = of(facts, "library_diff")
    assert [(d.package, d.baseline, d.target) for d in diffs] == [("deepspeed", "0.15.0", "0.14.2")]
    assert one(facts, "library_version", role="target", package="cann").version == "8.0.RC2"


# ------------------------------------------------------------------ framework defaults
def test_defaults_table_versions():
    assert defaults.lookup("megatron", "hidden_dropout") == ({"0.1"}, "")
    values, note = defaults.lookup("deepspeed", "clip_grad", {"deepspeed": "0.14.2"})
    assert values == {"0.0"} and "0.14.2" in note
    assert defaults.lookup("deepspeed", "clip_grad", {"deepspeed": "0.19.3"})[0] == {"1.0"}
    assert defaults.lookup("deepspeed", "clip_grad")[0] == {"0.0", "1.0"}  # version unknown
    assert defaults.lookup("hf_trainer", "weight_decay")[0] == {"0.0"}
    assert defaults.lookup("hf_trainer", "hidden_dropout") is None  # a model's config decides
    assert defaults.lookup("megatron", "no_such_key") is None


def test_unset_key_compared_with_the_framework_default(make_case):
    base = ("#!/bin/bash\ntorchrun --nproc_per_node 8 pretrain_gpt.py --tensor-model-parallel-size 1 "
            "--micro-batch-size 1 --lr 3e-4 {extra}\n")
    facts, _, _ = make_case({
        "baseline": {"pretrain_gpt.sh": base.format(extra="--hidden-dropout 0.1 --weight-decay 0.1"), "env.txt": GPU_ENV},
        "target": {"pretrain_gpt.sh": base.format(extra=""), "env.txt": NPU_ENV},
    })
    assert not of(facts, "config_diff", name="hidden_dropout")  # 0.1 is Megatron's default
    wd = one(facts, "config_diff", name="weight_decay")
    assert (wd.baseline, wd.target, wd.default_side, wd.relevant) == ("0.1", "0.01 (default)", "target", True)


def test_deepspeed_auto_and_max_grad_norm_without_gradient_clipping(make_case):
    run = "#!/bin/bash\ndeepspeed train.py --deepspeed ds_config.json --config train_config.yaml\n"
    yaml = "learning_rate: 2.0e-5\nper_device_train_batch_size: 4\nmax_grad_norm: 1.0\noutput_dir: out\n"
    ds_auto = '{"train_micro_batch_size_per_gpu": "auto", "gradient_clipping": "auto", "zero_optimization": {"stage": 2}}'
    ds_none = '{"train_micro_batch_size_per_gpu": "auto", "zero_optimization": {"stage": 2}}'
    facts, warnings, _ = make_case({
        "baseline": {"run_train.sh": run, "train_config.yaml": yaml, "ds_config.json": ds_auto, "env.txt": GPU_ENV,
                     "pip_freeze.txt": "deepspeed==0.14.2\ntorch==2.1.0\nnumpy==1.26.4\n"},
        "target": {"run_train.sh": run, "train_config.yaml": yaml, "ds_config.json": ds_none, "env.txt": NPU_ENV,
                   "pip_freeze.txt": "deepspeed==0.14.2\ntorch==2.1.0\nnumpy==1.26.4\n"},
    })
    assert one(facts, "config_value", role="baseline", name="micro_batch_size").value == "4"  # auto -> trainer
    assert one(facts, "config_value", role="baseline", name="clip_grad").value == "1.0"
    assert one(facts, "config_value", role="target", name="clip_grad").value == "0.0"  # DeepSpeed's own default
    clip = one(facts, "config_diff", name="clip_grad")
    assert (clip.baseline, clip.target) == ("1.0", "0.0")
    assert any("no gradient_clipping" in w["message"] for w in warnings.items)


@pytest.mark.parametrize("value", ["0.0", "1.0"])
def test_default_that_changed_with_unknown_version_stays_unset(make_case, value):
    """DeepSpeed's clipping default changed in 0.19.3: without the version the unset side is
    shown as unset (it may or may not differ), never as a guessed default."""
    run = "#!/bin/bash\ndeepspeed train.py --deepspeed ds_config.json\n"
    facts, _, _ = make_case({
        "baseline": {"run_train.sh": run, "ds_config.json": '{"gradient_clipping": %s, "train_batch_size": 8}' % value,
                     "env.txt": GPU_ENV},
        "target": {"run_train.sh": run, "ds_config.json": '{"train_batch_size": 8, "steps_per_print": 10}',
                   "env.txt": NPU_ENV},
    })
    clip = one(facts, "config_diff", name="clip_grad")
    assert (clip.baseline, clip.target, clip.default_side) == (value, "<unset>", None)
