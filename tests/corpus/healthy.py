"""Small healthy run folders written at test time (never copied from the scenario corpus): a
Megatron pair with every artefact kind, a Hugging Face Trainer pair and a torchtitan pair. A broken
corpus file replaces one of these files, so anything reported is the broken file's doing."""
from __future__ import annotations

import json
from pathlib import Path

MEGATRON_LINE = (" [2025-03-24 17:50:{sec:02d}] iteration {s:8d}/      20 | consumed samples: {c:12d} | elapsed time "
                 "per iteration (ms): 61.3 | throughput per GPU (TFLOP/s/GPU): 0.0 | learning rate: 3.000000E-04 | "
                 "global batch size:     8 | lm loss: {loss:.6E} | loss scale: 1.0 | grad norm: 1.639 | number of "
                 "skipped iterations:   0 | number of nan iterations:   0 |")
HF_LINE = "{{'loss': {loss:.4f}, 'grad_norm': 1.5, 'learning_rate': 0.0003, 'epoch': {epoch:.2f}}}"
TITAN_LINE = ("[rank0]:[titan] 2025-03-24 17:50:{sec:02d},100 - root - INFO - step: {s:2d}  loss: {loss:7.4f}  "
              "grad_norm: {gn:7.4f}  memory: 10.20GiB(10.74%)  tps: 1,234  tflops: 12.30  mfu: 3.94%")

ITERATIONS = 20


def loss_at(step: int, jitter: float = 0.0) -> float:
    """The healthy curve; `jitter` adds a zero-mean wobble of that size (two devices never print the
    same digits, and the same file twice is noticed as such)."""
    return 3.0 - step / 100 + jitter * ((step * 7) % 3 - 1)


def megatron_log(n: int = ITERATIONS, jitter: float = 0.0) -> str:
    head = ["using world size: 8, data-parallel size: 8, context-parallel size: 1",
            "------------------------ arguments ------------------------",
            "  lr .............................................. 0.0003",
            "-------------------- end of arguments ---------------------"]
    lines = [MEGATRON_LINE.format(sec=s % 60, s=s, c=8 * s, loss=loss_at(s, jitter)) for s in range(1, n + 1)]
    return "\n".join(head + lines) + "\n"


def hf_log(n: int = ITERATIONS, jitter: float = 0.0) -> str:
    return "\n".join(HF_LINE.format(loss=loss_at(s, jitter), epoch=s / n) for s in range(1, n + 1)) + "\n"


def titan_log(n: int = ITERATIONS, jitter: float = 0.0) -> str:
    return "\n".join(TITAN_LINE.format(sec=s, s=s, loss=loss_at(s, jitter), gn=1.5) for s in range(1, n + 1)) + "\n"


MEGATRON_SCRIPT = """#!/bin/bash
export CUDA_DEVICE_MAX_CONNECTIONS=1
NPROC=8
GPT_ARGS="
    --num-layers 2 \\
    --hidden-size 64 \\
    --num-attention-heads 4 \\
    --seq-length 64 \\
    --micro-batch-size 1 \\
    --global-batch-size 8 \\
    --lr 3e-4 \\
    --train-iters 20 \\
    --seed 1234
"
torchrun --nproc_per_node $NPROC pretrain_gpt.py $GPT_ARGS --log-interval 1 | tee logs/train.log
"""

HF_SCRIPT = """#!/bin/bash
export OMP_NUM_THREADS=8
torchrun --nproc_per_node 8 --master_port 29500 train_clm.py train_config.yaml 2>&1 | tee logs/train.log
"""

HF_CONFIG = """model_name_or_path: /data/models/tinygpt-hf
output_dir: ./output
seed: 42
max_steps: 20
per_device_train_batch_size: 1
gradient_accumulation_steps: 1
learning_rate: 0.0003
lr_scheduler_type: cosine
weight_decay: 0.01
logging_steps: 1
"""

TITAN_SCRIPT = """#!/bin/bash
export NGPU=8
torchrun --nproc_per_node 8 -m torchtitan.train --job.config_file train_config.toml
"""

TITAN_CONFIG = """[job]
dump_folder = "./outputs"

[training]
steps = 20
seed = 42
local_batch_size = 8
seq_len = 64

[optimizer]
name = "AdamW"
lr = 3e-4
eps = 1e-8
"""

ENV = {
    "gpu": "CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7\nNCCL_DEBUG=WARN\nCUDA_HOME=/usr/local/cuda\nPATH=/usr/bin\n",
    "npu": ("ASCEND_HOME_PATH=/usr/local/Ascend/ascend-toolkit/latest\nHCCL_CONNECT_TIMEOUT=1200\n"
            "ASCEND_GLOBAL_LOG_LEVEL=3\nPATH=/usr/bin\n"),
}
PIP = {
    "gpu": "numpy==1.26.4\ntorch==2.1.0+cu121\nnvidia-cublas-cu12==12.1.3.1\ntransformers==4.40.0\n",
    "npu": "numpy==1.26.4\ntorch==2.1.0\ntorch-npu==2.1.0.post3\ntransformers==4.40.0\n",
}


def _stats(mx: float, mn: float, mean: float, norm: float, shape: list[int]) -> dict:
    return {"type": "torch.Tensor", "dtype": "torch.float32", "shape": shape, "Max": mx, "Min": mn,
            "Mean": mean, "Norm": norm, "requires_grad": True}


def dump_json(gelu_scale: float = 1.0) -> dict:
    """A small statistics/mix dump: two APIs inside one module (`gelu_scale` != 1 makes gelu the
    first API whose output differs)."""
    x = _stats(1.5, -1.4, 0.01, 8.0, [1, 64, 64])
    w = _stats(0.2, -0.2, 0.0, 3.0, [64, 64])
    y = _stats(2.1, -2.0, 0.02, 9.5, [1, 64, 64])
    data = {
        "Functional.linear.0.forward": {"input_args": [x, w, None], "input_kwargs": {}, "output": [y]},
        "Functional.gelu.0.forward": {"input_args": [y], "input_kwargs": {}, "output": [
            _stats(2.0 * gelu_scale, -0.1 * gelu_scale, 0.4 * gelu_scale, 7.0 * gelu_scale, [1, 64, 64])]},
        "Module.mlp.MLP.forward.0": {"input_args": [x], "input_kwargs": {}, "output": [y], "parameters": {}},
    }
    return {"task": "statistics", "level": "mix", "framework": "pytorch", "dump_data_dir": None, "data": data}


CONSTRUCT = {"Functional.linear.0.forward": "Module.mlp.MLP.forward.0",
             "Functional.gelu.0.forward": "Module.mlp.MLP.forward.0",
             "Module.mlp.MLP.forward.0": None}
STACK = {"0": [["Functional.linear.0.forward"], ["File /work/model.py, line 10, in forward, \n return F.linear(x, w)"]],
         "1": [["Functional.gelu.0.forward"], ["File /work/model.py, line 11, in forward, \n return F.gelu(y)"]]}
MSPROBE_CONFIG = {"task": "statistics", "dump_path": "./msprobe_dump", "rank": [], "step": [0], "level": "mix",
                  "statistics": {"scope": [], "list": [], "data_mode": ["all"], "summary_mode": "statistics"}}

COMPARE_HEADER = ("NPU Name,Bench Name,NPU Dtype,Bench Dtype,NPU Tensor Shape,Bench Tensor Shape,NPU Requires_grad,"
                  "Bench Requires_grad,Max diff,Min diff,Mean diff,L2norm diff,MaxRelativeErr,MinRelativeErr,"
                  "MeanRelativeErr,NormRelativeErr,NPU max,NPU min,NPU mean,NPU l2norm,Bench max,Bench min,"
                  "Bench mean,Bench l2norm,Requires_grad Consistent,Result,Err_message,NPU_Stack_Info")


def compare_csv() -> str:
    rows = []
    for name in ("Functional.linear.0.forward.input.0", "Functional.linear.0.forward.output.0",
                 "Functional.gelu.0.forward.output.0"):
        rows.append(f"{name},{name},torch.float32,torch.float32,\"[1, 64, 64]\",\"[1, 64, 64]\",True,True,"
                    "0.0,0.0,0.0,0.0,0.0%,0.0%,0.0%,0.0%,1.5,-1.4,0.01,8.0,1.5,-1.4,0.01,8.0,True,pass,[],N/A")
    return COMPARE_HEADER + "\n" + "\n".join(rows) + "\n"


MONITOR_HEADER = "vpp_stage,name,step,min,max,mean,norm,nans,shape,dtype"


def monitor_csv(first: int, last: int) -> str:
    rows = [MONITOR_HEADER]
    for step in range(first, last + 1):
        for p, n in (("embedding.word_embeddings.weight", 0.47), ("decoder.layers.0.mlp.linear_fc1.weight", 0.31)):
            rows.append(f'0,{p},{step},-0.02,0.02,0.0,{n + step / 1000:.6f},0,"[256, 64]",torch.float32')
    return "\n".join(rows) + "\n"


MONITOR_CONFIG = {"targets": {}, "wg_distribution": True, "format": "csv",
                  "ops": ["min", "max", "mean", "norm", "nans"], "step_count_per_record": 10}

EVAL = {"eval_loss": 2.66, "eval_accuracy": 0.316, "perplexity": 14.3}


def trainer_state(n: int = ITERATIONS) -> dict:
    return {"global_step": n, "log_history": [{"loss": round(loss_at(s), 4), "grad_norm": 1.5,
                                               "learning_rate": 3e-4, "epoch": s / n, "step": s}
                                              for s in range(1, n + 1)]}


def write_run(root: Path, flavour: str, device: str, *, gelu_scale: float = 1.0) -> None:
    """One healthy run folder of the given flavour (megatron | hf | titan) on gpu or npu."""
    root.mkdir(parents=True, exist_ok=True)
    jitter = 2e-4 if device == "npu" else 0.0
    (root / "env.txt").write_text(ENV[device])
    (root / "pip_freeze.txt").write_text(PIP[device])
    if flavour == "megatron":
        (root / "train.log").write_text(megatron_log(jitter=jitter))
        (root / "pretrain_gpt.sh").write_text(MEGATRON_SCRIPT)
        (root / "msprobe_config.json").write_text(json.dumps(MSPROBE_CONFIG, indent=1))
        rank = root / "msprobe_dump" / "step0" / "rank0"
        rank.mkdir(parents=True)
        (rank / "dump.json").write_text(json.dumps(dump_json(gelu_scale), indent=1))
        (rank / "construct.json").write_text(json.dumps(CONSTRUCT, indent=1))
        (rank / "stack.json").write_text(json.dumps(STACK, indent=1))
        (root / "monitor_config.json").write_text(json.dumps(MONITOR_CONFIG, indent=1))
        mon = root / "monitor_output" / "Jul17_13-48-37-rank0-18524850"
        mon.mkdir(parents=True)
        (mon / "grad_reduced_0-9.csv").write_text(monitor_csv(0, 9))
        (mon / "grad_reduced_10-19.csv").write_text(monitor_csv(10, 19))
        (root / "eval.json").write_text(json.dumps(EVAL, indent=1))
        if device == "npu":
            cmp_dir = root / "msprobe_compare" / "step0"
            cmp_dir.mkdir(parents=True)
            (cmp_dir / "compare_result_rank0_20250324175000.csv").write_text(compare_csv())
    elif flavour == "hf":
        (root / "train.log").write_text(hf_log(jitter=jitter))
        (root / "run_train.sh").write_text(HF_SCRIPT)
        (root / "train_config.yaml").write_text(HF_CONFIG)
        ckpt = root / "output" / f"checkpoint-{ITERATIONS}"
        ckpt.mkdir(parents=True)
        (ckpt / "trainer_state.json").write_text(json.dumps(trainer_state(), indent=1))
        (root / "eval.json").write_text(json.dumps(EVAL, indent=1))
    elif flavour == "titan":
        (root / "train.log").write_text(titan_log(jitter=jitter))
        (root / "run_train.sh").write_text(TITAN_SCRIPT)
        (root / "train_config.toml").write_text(TITAN_CONFIG)
    else:
        raise ValueError(f"unknown flavour {flavour!r}")


def write_case(root: Path, flavour: str = "megatron") -> Path:
    """A case folder: baseline/ (GPU) and target/ (NPU) of the same job. Flavour `megatron-diverged`
    is the Megatron pair whose target dump differs at gelu (so stack/construct files are read)."""
    diverged = flavour == "megatron-diverged"
    flavour = "megatron" if diverged else flavour
    write_run(root / "baseline", flavour, "gpu")
    write_run(root / "target", flavour, "npu", gelu_scale=1.5 if diverged else 1.0)
    return root
