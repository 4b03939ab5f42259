"""Configuration facts from launch scripts and YAML/JSON/TOML configs: aliases, flags,
classification, derived batch sizes, malformed files."""
from __future__ import annotations

from precdx.facts.checklist import UNSET

from .conftest import GPU_ENV, GPU_PIP, NPU_ENV, NPU_PIP, of, one

MEGATRON_GPU = r'''#!/bin/bash
export CUDA_DEVICE_MAX_CONNECTIONS=1
GPUS_PER_NODE=8
DATA_PATH=/data/dataset/wiki_text_document
GPT_ARGS="
    --tensor-model-parallel-size 2 \
    --micro-batch-size 2 \
    --global-batch-size 64 \
    --lr 3e-4 \
    --seed 1234 \
    --attention-dropout 0.0 \
    --hidden-dropout 0.0 \
    --no-masked-softmax-fusion \
    --use-distributed-optimizer
"
torchrun --nproc_per_node $GPUS_PER_NODE pretrain_gpt.py $GPT_ARGS --data-path $DATA_PATH \
    --log-interval 1 --distributed-backend nccl
'''


def npu_script(extra: str = "", lr: str = "0.0003", log_interval: str = "10") -> str:
    return rf'''#!/bin/bash
source /usr/local/Ascend/ascend-toolkit/set_env.sh
NPUS_PER_NODE=8
DATA_PATH=/home/ma-user/data/wiki_text_document
GPT_ARGS="
    --tensor-model-parallel-size 2 \
    --micro-batch-size 2 \
    --global-batch-size 64 \
    --lr {lr} \
    --seed 1234 \
    --attention-dropout 0.0 \
    --hidden-dropout 0.0 \
    --no-masked-softmax-fusion \
    --use-distributed-optimizer {extra}
"
torchrun --nproc_per_node $NPUS_PER_NODE pretrain_gpt.py $GPT_ARGS --data-path $DATA_PATH \
    --log-interval {log_interval} --distributed-backend hccl --no-shared-storage
'''


def megatron_case(make_case, target_script: str):
    return make_case({
        "baseline": {"pretrain_gpt.sh": MEGATRON_GPU, "env.txt": GPU_ENV, "pip_freeze.txt": GPU_PIP},
        "target": {"pretrain_gpt.sh": target_script, "env.txt": NPU_ENV, "pip_freeze.txt": NPU_PIP},
    })


def test_equal_values_in_other_spellings_are_not_differences(make_case):
    facts, warnings, _ = megatron_case(make_case, npu_script())
    names = {f.name for f in of(facts, "config_diff")}
    assert "lr" not in names  # 3e-4 == 0.0003
    assert "masked_softmax_fusion" not in names
    assert not list(warnings)


def test_hyperparameter_difference_is_relevant_with_relative_change(make_case):
    facts, _, _ = megatron_case(make_case, npu_script(lr="3e-3"))
    diff = one(facts, "config_diff", pair="target~baseline", name="lr")
    assert (diff.category, diff.baseline, diff.target, diff.presence) == ("hyperparameter", "3e-4", "3e-3", "both")
    assert diff.relevant and abs(diff.rel_change - 9.0) < 1e-9
    assert diff.role == "target" and diff.ref_role == "baseline"


def test_device_logging_and_path_only_differences_are_not_relevant(make_case):
    facts, _, _ = megatron_case(make_case, npu_script())
    by_name = {f.name: f for f in of(facts, "config_diff")}
    assert by_name["no_shared_storage"].category == "device" and not by_name["no_shared_storage"].relevant
    assert by_name["distributed_backend"].category == "device" and not by_name["distributed_backend"].relevant
    assert by_name["log_interval"].category == "logging" and not by_name["log_interval"].relevant
    data = by_name["data_path"]
    assert data.path_only and not data.relevant and data.category == "data"
    assert [f.name for f in of(facts, "config_diff") if f.relevant] == []


def test_overlap_flag_on_one_side_is_a_framework_option_difference(make_case):
    facts, _, _ = megatron_case(make_case, npu_script(extra="\\\n    --overlap-param-gather \\\n    --use-flash-attn"))
    overlap = one(facts, "config_diff", name="overlap_param_gather")
    # the baseline leaves it unset: Megatron's default (off) is shown as such
    assert (overlap.category, overlap.baseline, overlap.target, overlap.presence, overlap.default_side) == (
        "framework_option", "false (default)", "true", "target_only", "baseline")
    assert overlap.relevant and overlap.same_framework
    assert one(facts, "config_diff", name="use_flash_attn").category == "framework_option"
    value = one(facts, "config_value", role="target", name="overlap_param_gather")
    assert value.flag is True and value.framework == "mindspeed"


def test_negated_megatron_flag_differs_from_absent_flag(make_case):
    script = npu_script().replace("--no-masked-softmax-fusion \\\n", "")
    facts, _, _ = megatron_case(make_case, script)
    diff = one(facts, "config_diff", name="masked_softmax_fusion")
    assert (diff.baseline, diff.target, diff.presence) == ("false", UNSET, "baseline_only")


def test_config_values_and_derived_batch(make_case):
    facts, _, _ = megatron_case(make_case, npu_script())
    seed = one(facts, "config_value", role="baseline", name="seed")
    assert seed.value == "1234" and seed.number == 1234 and seed.category == "determinism"
    assert seed.source.endswith("pretrain_gpt.sh")
    dp = one(facts, "config_value", role="target", name="data_parallel_size")
    assert dp.value == "4" and dp.explicit is False  # 8 devices / TP 2
    gas = one(facts, "config_value", role="target", name="gradient_accumulation_steps")
    assert gas.value == "8"  # 64 / (2 x 4)


HF_YAML = """\
model_name_or_path: /data/models/tiny
dataset: /data/dataset/synth_text
seed: 42
per_device_train_batch_size: 1
gradient_accumulation_steps: 2
learning_rate: 0.0003
lr_scheduler_kwargs:
  min_lr: 3e-05
bf16: true
fsdp:
logging_steps: 1
attn_dropout: 0.0
"""
HF_RUN = "#!/bin/bash\nNPROC=8\ntorchrun --nproc_per_node $NPROC train_clm.py train_config.yaml\n"


def test_hf_yaml_aliases_map_to_megatron_names(make_case):
    target_yaml = (HF_YAML.replace("learning_rate: 0.0003", "learning_rate: 0.0001")
                   .replace("fsdp:\n", "fsdp: full_shard auto_wrap\nfsdp_config:\n  fsdp_use_orig_params: true\n")
                   .replace("per_device_train_batch_size: 1", "per_device_train_batch_size: 2"))
    facts, warnings, _ = make_case({
        "baseline": {"run_train.sh": HF_RUN, "train_config.yaml": HF_YAML, "env.txt": GPU_ENV},
        "target": {"run_train.sh": HF_RUN, "train_config.yaml": target_yaml, "env.txt": NPU_ENV},
    })
    assert not list(warnings)
    lr = one(facts, "config_diff", name="lr")
    assert (lr.baseline_name, lr.baseline, lr.target) == ("learning_rate", "0.0003", "0.0001")
    fsdp = one(facts, "config_diff", name="fsdp")
    assert (fsdp.category, fsdp.baseline, fsdp.target) == ("parallel", "false (default)", "full_shard auto_wrap")
    assert one(facts, "config_diff", name="fsdp_config.fsdp_use_orig_params").category == "parallel"
    mbs = one(facts, "config_diff", name="micro_batch_size")
    assert mbs.baseline_name == "per_device_train_batch_size"
    gbs = one(facts, "config_diff", name="global_batch_size")  # 1x2x8 vs 2x2x8, derived
    assert (gbs.baseline, gbs.target) == ("16", "32")
    assert one(facts, "config_value", role="baseline", name="min_lr").number == 3e-05
    assert one(facts, "config_value", role="baseline", name="bf16").flag is True
    assert one(facts, "config_value", role="baseline", name="lr").framework == "hf_trainer"


DS_JSON = """{
  "train_batch_size": 64,
  "train_micro_batch_size_per_gpu": 2,
  "gradient_clipping": 1.0,
  "zero_optimization": {"stage": %d, "overlap_comm": true},
  "fp16": {"enabled": true, "initial_scale_power": 16, "loss_scale_window": 1000},
  "optimizer": {"type": "Adam", "params": {"lr": 3e-4, "betas": [0.9, 0.95], "eps": 1e-8}}
}"""
DS_SCRIPT = ("#!/bin/bash\ndeepspeed --num_gpus 8 pretrain_gpt.py --num-layers 2 "
             "--deepspeed --deepspeed_config ds_config.json\n")


def test_deepspeed_json_settings(make_case):
    facts, warnings, case = make_case({
        "baseline": {"pretrain_gpt.sh": DS_SCRIPT, "ds_config.json": DS_JSON % 1, "env.txt": GPU_ENV},
        "target": {"pretrain_gpt.sh": DS_SCRIPT, "ds_config.json": DS_JSON % 2, "env.txt": NPU_ENV},
    })
    assert not list(warnings)
    kinds = {(a.path.name, a.kind, a.detail) for a in case.runs[0].artefacts}
    assert ("ds_config.json", "config.json", "deepspeed") in kinds
    zero = one(facts, "config_diff", name="zero_stage")
    assert (zero.category, zero.baseline, zero.target) == ("parallel", "1", "2")
    values = {f.name: f.value for f in of(facts, "config_value", role="baseline")}
    assert values["adam_beta2"] == "0.95" and values["adam_eps"] == "1e-08"
    assert values["initial_loss_scale"] == "65536.0" and values["fp16"] == "true"
    assert values["micro_batch_size"] == "2" and values["clip_grad"] == "1.0"
    assert values["overlap_comm"] == "true" and values["lr"] == "0.0003"
    assert one(facts, "config_value", role="baseline", name="lr").framework == "megatron_deepspeed"


TOML = """\
[job]
dump_folder = "./outputs"

[model]
name = "llama3"
flavor = "debugmodel"

[optimizer]
name = "AdamW"
lr = %s
eps = 1e-8

[training]
batch_size = 8
seq_len = 2048
max_norm = 1.0
steps = 100
seed = 42

[parallelism]
data_parallel_shard_degree = -1
tensor_parallel_degree = 1
"""
TITAN_RUN = "#!/bin/bash\ntorchrun --nproc_per_node 8 -m torchtitan.train --job.config_file train_config.toml\n"


def test_torchtitan_toml_settings(make_case):
    facts, warnings, _ = make_case({
        "baseline": {"run_train.sh": TITAN_RUN, "train_config.toml": TOML % "8e-4", "env.txt": GPU_ENV},
        "target": {"run_train.sh": TITAN_RUN, "train_config.toml": TOML % "4e-4", "env.txt": NPU_ENV},
    })
    assert not list(warnings)
    lr = one(facts, "config_diff", name="lr")
    assert (lr.baseline_name, lr.baseline, lr.target) == ("optimizer.lr", "0.0008", "0.0004")
    values = {f.name: f.value for f in of(facts, "config_value", role="target")}
    assert values["seq_length"] == "2048" and values["micro_batch_size"] == "8"
    assert values["clip_grad"] == "1.0" and values["seed"] == "42" and values["train_iters"] == "100"
    assert values["tensor_model_parallel_size"] == "1" and values["adam_eps"] == "1e-08"
    assert one(facts, "config_value", role="target", name="lr").framework == "torchtitan"


def test_malformed_configs_warn_and_other_artefacts_still_count(make_case):
    broken_yaml = HF_YAML + "learning_rate: [unclosed\n"
    broken_script = npu_script(lr="3e-3") + 'EXTRA="--bf16\n'
    facts, warnings, _ = make_case({
        "baseline": {"run_train.sh": HF_RUN, "train_config.yaml": broken_yaml, "env.txt": GPU_ENV,
                     "pip_freeze.txt": GPU_PIP},
        "target": {"pretrain_gpt.sh": broken_script, "env.txt": NPU_ENV, "pip_freeze.txt": NPU_PIP},
    })
    messages = {w["path"].rsplit("/", 1)[-1]: w for w in warnings}
    assert "invalid YAML" in messages["train_config.yaml"]["message"]
    assert messages["train_config.yaml"]["line"] >= 13  # where the parser noticed the problem
    assert "not valid shell" in messages["pretrain_gpt.sh"]["message"]
    assert messages["pretrain_gpt.sh"]["line"] == 18
    # the script part before the broken line is still read; env and pip are still used
    assert one(facts, "config_value", role="target", name="lr").value == "3e-3"
    assert of(facts, "env_switch", role="baseline")
    assert of(facts, "library_version", role="target", package="torch-npu")
    # half-read configs do not produce one-sided differences
    assert not [f for f in of(facts, "config_diff") if f.presence != "both"]


def test_invalid_json_and_toml_are_named(make_case):
    facts, warnings, _ = make_case({
        "baseline": {"run_train.sh": TITAN_RUN, "train_config.toml": TOML % "8e-4 8e-4", "env.txt": GPU_ENV},
        "target": {"pretrain_gpt.sh": DS_SCRIPT, "ds_config.json": (DS_JSON % 1)[:-3], "env.txt": NPU_ENV},
    })
    text = " | ".join(f"{w['path']}: {w['message']}" for w in warnings)
    assert "train_config.toml: TOML config could not be read (invalid TOML" in text
    assert "ds_config.json: JSON config could not be read (invalid JSON" in text
    assert of(facts, "env_switch", role="target")
