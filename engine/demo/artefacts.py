"""Renders a demo run as the files a real job leaves behind: a Megatron-LM console log, the
launch script, the shell environment, ``pip freeze``, the msprobe config and the case's
expected.yaml. Plain text templates; no torch."""
from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any, Sequence

import yaml

SIDES = {
    "gpu": {"host": "gpu-a100-017", "home": "/root", "data_root": "/data",
            "megatron": "/workspace/Megatron-LM", "python": "/usr/local/lib/python3.10/dist-packages"},
    "npu": {"host": "node-10-0-3-82", "home": "/home/ma-user", "data_root": "/home/ma-user/work/data",
            "megatron": "/home/ma-user/work/Megatron-LM", "python": "/usr/local/python3.10/lib/python3.10/site-packages"},
}


def _fmt_num(value: float) -> str:
    return f"{value:.6E}"


def gpt_args(train: Any) -> list[tuple[str, str | None]]:
    """The launch script's GPT_ARGS as (flag, value) pairs, from the run's real settings."""
    m = train.model
    args: list[tuple[str, str | None]] = [
        ("--tensor-model-parallel-size", "1"), ("--pipeline-model-parallel-size", "1"),
        ("--num-layers", str(m.num_layers)), ("--hidden-size", str(m.hidden_size)),
        ("--ffn-hidden-size", str(m.ffn_hidden_size)), ("--num-attention-heads", str(m.num_attention_heads)),
        ("--seq-length", str(m.seq_length)), ("--max-position-embeddings", str(m.seq_length)),
        ("--micro-batch-size", str(train.micro_batch_size)), ("--global-batch-size", str(train.global_batch_size)),
        ("--lr", f"{train.lr:g}"), ("--min-lr", f"{train.min_lr:g}"), ("--lr-decay-style", "cosine"),
        ("--lr-warmup-iters", str(train.lr_warmup_iters)), ("--train-iters", str(train.train_iters)),
        ("--weight-decay", f"{train.weight_decay:g}"), ("--adam-beta1", f"{train.adam_beta1:g}"),
        ("--adam-beta2", f"{train.adam_beta2:g}"), ("--adam-eps", f"{train.adam_eps:g}"),
        ("--clip-grad", f"{train.clip_grad:g}"), ("--init-method-std", f"{m.init_method_std:g}"),
        ("--attention-dropout", f"{m.dropout:g}"), ("--hidden-dropout", f"{m.dropout:g}"),
        ("--position-embedding-type", "learned_absolute"),
        ("--seed", str(train.seed) if train.seed_fixed else "$RANDOM"),
        ("--untie-embeddings-and-output-weights", None), ("--use-mcore-models", None),
        ("--transformer-impl", "local"), ("--no-masked-softmax-fusion", None),
        ("--no-gradient-accumulation-fusion", None), ("--tokenizer-type", "NullTokenizer"),
        ("--vocab-size", str(m.vocab_size)),
    ]
    if train.bf16:
        args += [("--bf16", None)]
    if train.fp16:
        args += [("--fp16", None), ("--initial-loss-scale", str(train.initial_loss_scale)),
                 ("--loss-scale-window", str(train.loss_scale_window)), ("--hysteresis", str(train.hysteresis)),
                 ("--min-loss-scale", f"{train.min_loss_scale:g}")]
    return args


def launch_script(train: Any, side: str) -> str:
    s = SIDES[side]
    arg_lines = [f"    {flag} {value}" if value is not None else f"    {flag}"
                 for flag, value in gpt_args(train)]
    args = " \\\n".join(arg_lines)  # Megatron scripts: no continuation after the last flag
    if side == "npu":
        head = ("source /usr/local/Ascend/ascend-toolkit/set_env.sh\nexport CUDA_DEVICE_MAX_CONNECTIONS=1\n"
                "export PYTORCH_NPU_ALLOC_CONF=expandable_segments:True\nexport HCCL_CONNECT_TIMEOUT=1200\n"
                "export TASK_QUEUE_ENABLE=2\n\nNPUS_PER_NODE=1")
        per_node = "$NPUS_PER_NODE"
    else:
        head = "export CUDA_DEVICE_MAX_CONNECTIONS=1\nexport NCCL_DEBUG=WARN\n\nGPUS_PER_NODE=1"
        per_node = "$GPUS_PER_NODE"
    return f"""#!/bin/bash

{head}
MASTER_ADDR=${{MASTER_ADDR:-localhost}}
MASTER_PORT=6000
NNODES=1
NODE_RANK=${{NODE_RANK:-0}}
WORLD_SIZE=$(({per_node}*$NNODES))

CKPT_LOAD_DIR={s['data_root']}/{train.load}
CKPT_SAVE_DIR=./ckpt
DATA_PATH={s['data_root']}/dataset/{train.data_path}

DISTRIBUTED_ARGS="
    --nproc_per_node {per_node} \\
    --nnodes $NNODES \\
    --node_rank $NODE_RANK \\
    --master_addr $MASTER_ADDR \\
    --master_port $MASTER_PORT
"

GPT_ARGS="
{args}
"

DATA_ARGS="
    --data-path $DATA_PATH \\
    --split 949,50,1
"

OUTPUT_ARGS="
    --log-interval 1 \\
    --save-interval 10000 \\
    --eval-interval 10000 \\
    --eval-iters 0 \\
    --log-throughput
"

torchrun $DISTRIBUTED_ARGS pretrain_gpt.py \\
    $GPT_ARGS \\
    $DATA_ARGS \\
    $OUTPUT_ARGS \\
    --distributed-backend nccl \\
    --load $CKPT_LOAD_DIR \\
    --finetune \\
    --no-load-optim \\
    --no-load-rng \\
    --save $CKPT_SAVE_DIR \\
    | tee logs/train.log
"""


def _arguments(train: Any, side: str) -> dict[str, Any]:
    m = train.model
    s = SIDES[side]
    return {
        "adam_beta1": train.adam_beta1, "adam_beta2": train.adam_beta2, "adam_eps": train.adam_eps,
        "add_bias_linear": True, "apply_residual_connection_post_layernorm": False,
        "attention_dropout": m.dropout, "bf16": train.bf16, "check_for_nan_in_loss_and_grad": True,
        "clip_grad": train.clip_grad, "data_path": [f"{s['data_root']}/dataset/{train.data_path}"],
        "deterministic_mode": False, "ffn_hidden_size": m.ffn_hidden_size, "finetune": True,
        "fp16": train.fp16, "global_batch_size": train.global_batch_size, "hidden_dropout": m.dropout,
        "hidden_size": m.hidden_size, "hysteresis": train.hysteresis,
        "init_method_std": m.init_method_std,
        "initial_loss_scale": train.initial_loss_scale if train.fp16 else 4294967296,
        "load": f"{s['data_root']}/{train.load}", "log_interval": 1, "log_throughput": True,
        "loss_scale": None, "loss_scale_window": train.loss_scale_window if train.fp16 else 1000,
        "lr": train.lr, "lr_decay_style": "cosine", "lr_warmup_iters": train.lr_warmup_iters,
        "make_vocab_size_divisible_by": 128, "max_position_embeddings": m.seq_length,
        "micro_batch_size": train.micro_batch_size, "min_loss_scale": train.min_loss_scale,
        "min_lr": train.min_lr, "norm_epsilon": m.norm_epsilon, "normalization": "LayerNorm",
        "num_attention_heads": m.num_attention_heads, "num_layers": m.num_layers,
        "optimizer": "adam",
        "params_dtype": "torch.float16" if train.fp16 else "torch.bfloat16" if train.bf16 else "torch.float32",
        "position_embedding_type": "learned_absolute", "rank": 0, "save": "./ckpt",
        "seed": train.seed if train.seed_fixed else "random", "seq_length": m.seq_length, "split": "949,50,1",
        "tokenizer_type": "NullTokenizer", "train_iters": train.train_iters,
        "transformer_impl": "local", "untie_embeddings_and_output_weights": True,
        "use_mcore_models": True, "vocab_size": m.vocab_size, "weight_decay": train.weight_decay,
        "world_size": 1,
    }


_NPU_PREAMBLE = """{py}/torch_npu/utils/path_manager.py:82: UserWarning: Warning: The /usr/local/Ascend/ascend-toolkit/latest owner does not match the current user.
  warnings.warn(f"Warning: The {{path}} owner does not match the current user.")
{py}/torch_npu/contrib/transfer_to_npu.py:292: ImportWarning: 
    *************************************************************************************************************
    The torch.Tensor.cuda and torch.nn.Module.cuda are replaced with torch.Tensor.npu and torch.nn.Module.npu now..
    The torch.cuda.DoubleTensor is replaced with torch.npu.FloatTensor cause the double type is not supported now..
    The backend in torch.distributed.init_process_group set to hccl now..
    The torch.cuda.* and torch.cuda.amp.* are replaced with torch.npu.* and torch.npu.amp.* now..
    *************************************************************************************************************
    warnings.warn(msg, ImportWarning)
"""


def _stamp(ts: float, side: str) -> str:
    when = dt.datetime.fromtimestamp(ts)
    # Megatron-LM prints microseconds; MindSpeed-LLM (the NPU side) does not
    return when.strftime("%Y-%m-%d %H:%M:%S.%f" if side == "gpu" else "%Y-%m-%d %H:%M:%S")


def iteration_line(rec: Any, train: Any, side: str) -> str:
    parts = [f" [{_stamp(rec.timestamp, side)}] iteration {rec.iteration:8d}/{train.train_iters:8d} |",
             f" consumed samples: {rec.consumed_samples:12d} |",
             f" elapsed time per iteration (ms): {rec.elapsed_ms:.1f} |",
             " throughput per GPU (TFLOP/s/GPU): 0.0 |",
             f" learning rate: {_fmt_num(rec.lr)} |",
             f" global batch size: {train.global_batch_size:5d} |"]
    if rec.loss is not None and rec.loss >= 0.0:
        parts.append(f" lm loss: {_fmt_num(rec.loss)} |")
    parts.append(f" loss scale: {rec.loss_scale:.1f} |")
    if rec.grad_norm is not None:
        parts.append(f" grad norm: {rec.grad_norm:.3f} |")
    parts.append(f" number of skipped iterations: {rec.skipped:3d} |")
    parts.append(f" number of nan iterations: {rec.nan:3d} |")
    return "".join(parts)


def train_log(train: Any, side: str, result: Any, started: float) -> str:
    s = SIDES[side]
    pid = 40000 + (train.seed % 9000)
    when = dt.datetime.fromtimestamp(started)
    w = f"W{when.strftime('%m%d %H:%M:%S.%f')} {pid} torch/distributed/run.py:779]"
    lines = [f"{w} ", f"{w} *****************************************",
             f"{w} Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, "
             "to avoid your system being overloaded, please further tune the variable for optimal "
             "performance in your application as needed. ",
             f"{w} *****************************************"]
    if side == "npu":
        lines += _NPU_PREAMBLE.format(py=s["python"]).rstrip("\n").split("\n")
    lines += ["using world size: 1, data-parallel size: 1, context-parallel size: 1, hierarchical "
              "context-parallel sizes: Nonetensor-model-parallel size: 1, encoder-tensor-model-parallel "
              "size: 0, pipeline-model-parallel size: 1, encoder-pipeline-model-parallel size: 0",
              f"using {'torch.float16' if train.fp16 else 'torch.bfloat16' if train.bf16 else 'torch.float32'} "
              "for parameters ...",
              "------------------------ arguments ------------------------"]
    for key, value in sorted(_arguments(train, side).items()):
        lines.append(f"  {key} {'.' * (48 - len(key))} {value}")
    lines += ["-------------------- end of arguments ---------------------",
              "setting number of microbatches to constant 1",
              "> building NullTokenizer tokenizer ...",
              f" > padded vocab (size: {train.model.vocab_size}) with "
              f"{(-train.model.vocab_size) % 128} dummy tokens (new size: "
              f"{train.model.vocab_size + (-train.model.vocab_size) % 128})",
              "> initializing torch distributed ...",
              f"> setting random seeds to {train.seed} ...",
              f"[after megatron is initialized] datetime: {when.strftime('%Y-%m-%d %H:%M:%S')} ",
              "building GPT model ...",
              f" > number of parameters on (tensor, pipeline) model parallel rank (0, 0): {result.num_parameters}",
              f" loading checkpoint from {s['data_root']}/{train.load} at iteration 500",
              f"  successfully loaded checkpoint from {s['data_root']}/{train.load} [ t 0, p 0 ] at iteration 0",
              "> building train, validation, and test datasets ...",
              "> finished creating GPT datasets ...",
              "training ...",
              f"[before the start of training step] datetime: {when.strftime('%Y-%m-%d %H:%M:%S')} "]
    lines += [iteration_line(rec, train, side) for rec in result.iterations]
    if result.failed_at is not None:
        lines += _nan_traceback(s, side)
    else:
        end = dt.datetime.fromtimestamp(result.iterations[-1].timestamp if result.iterations else started)
        lines += [f"[after training is done] datetime: {end.strftime('%Y-%m-%d %H:%M:%S')} ",
                  f"saving checkpoint at iteration {train.train_iters:7d} to ./ckpt in torch_dist format",
                  f"  successfully saved checkpoint from iteration {train.train_iters:7d} to ./ckpt [ t 1/1, p 1/1 ]"]
    return "\n".join(lines) + "\n"


def _nan_traceback(s: dict[str, str], side: str) -> list[str]:
    meg = s["megatron"]
    entry = "/home/ma-user/work/MindSpeed-LLM/pretrain_gpt.py" if side == "npu" else f"{meg}/pretrain_gpt.py"
    frames = [
        (entry, 234, "<module>", "main()"),
        (f"{meg}/megatron/training/training.py", 383, "pretrain",
         "iteration, num_floating_point_operations_so_far = train("),
        (f"{meg}/megatron/training/training.py", 1235, "train", "train_step(forward_step_func,"),
        (f"{meg}/megatron/training/training.py", 711, "train_step", "losses_reduced = forward_backward_func("),
        (f"{meg}/megatron/core/pipeline_parallel/schedules.py", 470, "forward_backward_no_pipelining",
         "config.finalize_model_grads_func([model])"),
        (f"{meg}/megatron/core/distributed/param_and_grad_buffer.py", 150, "check_for_nan_in_grad",
         "assert not norm.isnan(), ("),
    ]
    out = ["[rank0]: Traceback (most recent call last):"]
    for path, line, func, code in frames:
        out += [f'[rank0]:   File "{path}", line {line}, in {func}', f"[rank0]:     {code}"]
    out.append("[rank0]: AssertionError: Rank 0: found NaN in local grad norm in backward pass before "
               f"data-parallel communication collective. Device: 0, node: {s['host']}")
    return out


def env_listing(side: str) -> str:
    s = SIDES[side]
    if side == "gpu":
        env = {"CUDA_DEVICE_MAX_CONNECTIONS": "1", "CUDA_HOME": "/usr/local/cuda", "CUDA_VERSION": "12.4.1",
               "CUDA_VISIBLE_DEVICES": "0", "NCCL_DEBUG": "WARN", "NVIDIA_PYTORCH_VERSION": "24.07",
               "LD_LIBRARY_PATH": "/usr/local/cuda/lib64:/usr/local/nvidia/lib64",
               "PATH": "/usr/local/nvidia/bin:/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
               "PYTHONPATH": s["megatron"]}
    else:
        root = "/usr/local/Ascend/ascend-toolkit/latest"
        env = {"ASCEND_AICPU_PATH": root, "ASCEND_GLOBAL_LOG_LEVEL": "3", "ASCEND_HOME_PATH": root,
               "ASCEND_OPP_PATH": f"{root}/opp", "ASCEND_RT_VISIBLE_DEVICES": "0",
               "ASCEND_TOOLKIT_HOME": "/usr/local/Ascend/ascend-toolkit/8.0.0",
               "CUDA_DEVICE_MAX_CONNECTIONS": "1", "HCCL_CONNECT_TIMEOUT": "1200", "INF_NAN_MODE_ENABLE": "1",
               "LD_LIBRARY_PATH": f"/usr/local/Ascend/driver/lib64/driver:{root}/lib64",
               "PATH": f"/usr/local/python3.10/bin:{root}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
               "PYTHONPATH": f"/home/ma-user/work/MindSpeed-LLM:{s['megatron']}",
               "PYTORCH_NPU_ALLOC_CONF": "expandable_segments:True", "TASK_QUEUE_ENABLE": "2"}
    env.update({"HOME": s["home"], "HOSTNAME": s["host"], "LANG": "C.UTF-8", "MASTER_ADDR": s["host"],
                "MASTER_PORT": "6000", "NNODES": "1", "OMP_NUM_THREADS": "8"})
    return "".join(f"{k}={v}\n" for k, v in sorted(env.items()))


_COMMON_PIP = ["absl-py==2.1.0", "einops==0.8.0", "megatron-core==0.8.0", "mindstudio-probe==26.2.0",
               "numpy==1.26.4", "packaging==24.1", "protobuf==4.25.4", "pybind11==2.13.1",
               "PyYAML==6.0.1", "regex==2024.7.24", "safetensors==0.4.4", "sentencepiece==0.2.0",
               "six==1.16.0", "sympy==1.13.1", "tensorboard==2.17.0", "tqdm==4.66.4",
               "typing_extensions==4.12.2"]
_GPU_PIP = ["apex==0.1", "flash-attn==2.6.3", "nvidia-cublas-cu12==12.4.5.8",
            "nvidia-cuda-runtime-cu12==12.4.127", "nvidia-cudnn-cu12==9.1.0.70", "nvidia-nccl-cu12==2.21.5",
            "torch==2.4.0+cu124", "transformer-engine @ git+https://github.com/NVIDIA/TransformerEngine.git@c27ee60",
            "triton==3.0.0"]
_NPU_PIP = ["apex @ file:///home/ma-user/apex/dist/apex-0.1%2Bascend-cp310-cp310-linux_aarch64.whl",
            "hccl @ file:///usr/local/Ascend/ascend-toolkit/latest/lib64/hccl-0.1.0-py3-none-any.whl",
            "mindspeed @ git+https://gitee.com/ascend/MindSpeed.git@core_r0.8.0",
            "te @ file:///usr/local/Ascend/ascend-toolkit/latest/lib64/te-0.4.0-py3-none-any.whl",
            "torch-npu==2.4.0.post2", "torch==2.4.0"]


def pip_freeze(side: str, fmt: str = "megatron") -> str:
    lines = _COMMON_PIP + (_GPU_PIP if side == "gpu" else _NPU_PIP) + _FORMAT_PIP.get(fmt, [])
    return "".join(f"{line}\n" for line in sorted(lines, key=str.lower))


def write_run(run_dir: Path, train: Any, side: str, result: Any, started: float,
              probe_config: dict[str, Any] | None, log_format: str = "megatron") -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "train.log").write_text(render_log(log_format, train, side, result, started), encoding="utf-8")
    write_configs(run_dir, log_format, train, side)
    (run_dir / "env.txt").write_text(env_listing(side), encoding="utf-8")
    (run_dir / "pip_freeze.txt").write_text(pip_freeze(side, log_format), encoding="utf-8")
    if probe_config is not None:
        (run_dir / "msprobe_config.json").write_text(json.dumps(probe_config, indent=2) + "\n", encoding="utf-8")


def write_expected(case_dir: Path, failure_mode: str, runs: Sequence[str], extra: dict[str, str]) -> None:
    doc: dict[str, Any] = {"failure_modes": [failure_mode], "verdict": "misaligned"}
    doc.update(extra)
    doc["runs"] = {r: r for r in runs}
    (case_dir / "expected.yaml").write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")


# ---- other trainers' logs and configs (the evaluation matrix's log formats) ---------------------
# megatron:   GPU Megatron-LM, NPU MindSpeed-LLM (mcore path): the classic demo
# mindspeed:  GPU Megatron-LM, NPU MindSpeed-LLM FSDP2 path (`INFO [..] >>  iteration ...`)
# deepspeed:  both DeepSpeed (engine progress, loss-scaler and pipeline-engine lines) + ds_config.json
# hf:         both the Hugging Face Trainer (logged dicts) + launch script and model config.json
# torchtitan: both torchtitan (`[rank0]:[titan] ... step:  1  loss: ...`) + train_config.toml


def _lr_list(rec: Any) -> str:
    return f"[{rec.lr!r}, {rec.lr!r}]"


def _dt(ts: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(ts)


def mindspeed_fsdp2_line(rec: Any, train: Any) -> str:
    tokens = rec.consumed_samples * train.model.seq_length
    parts = [f"INFO [{_dt(rec.timestamp).strftime('%Y-%m-%d %H:%M:%S')}] >>  iteration {rec.iteration:8d}/"
             f"{train.train_iters:8d} |",
             f" consumed samples: {rec.consumed_samples:10d} |", f" consumed tokens: {tokens:10d} |",
             f" elapsed time per iteration (ms): {rec.elapsed_ms:.2f} |",
             f" learning rate: {_fmt_num(rec.lr)} |", f" global batch size: {train.global_batch_size:5d} |"]
    if rec.loss is not None and rec.loss > 0.0:
        parts.append(f" lm loss: {_fmt_num(rec.loss)} |")
    if rec.grad_norm is not None:
        parts.append(f" grad norm: {rec.grad_norm:.3f} |")
    parts += [" max_memory_allocated(GB): 0.02 |", " max_memory_reserved(GB): 0.03 |"]
    return "".join(parts)


def _mindspeed_fsdp2_log(train: Any, result: Any, started: float) -> str:
    s = SIDES["npu"]
    stamp = _dt(started).strftime("%Y-%m-%d %H:%M:%S")
    lines = _NPU_PREAMBLE.format(py=s["python"]).rstrip("\n").split("\n")
    lines += [f"INFO [{stamp}] >>  Training with FSDP2 backend, world size 1",
              f"INFO [{stamp}] >>  lr={train.lr:g}, min_lr={train.min_lr:g}, warmup={train.lr_warmup_iters}, "
              f"train_iters={train.train_iters}, micro_batch_size={train.micro_batch_size}, seed="
              f"{train.seed if train.seed_fixed else 'random'}, bf16={train.bf16}",
              f"INFO [{stamp}] >>  loading checkpoint from {s['data_root']}/{train.load}",
              f"INFO [{stamp}] >>  training ..."]
    lines += [mindspeed_fsdp2_line(rec, train) for rec in result.iterations]
    if result.failed_at is not None:
        fake = _failed_record(train, result)
        lines.append(mindspeed_fsdp2_line(fake, train))
        lines.append(f"ERROR [{stamp}] >>  found NaN in grad norm at iteration {result.failed_at}, stopping")
    return "\n".join(lines) + "\n"


def _failed_record(train: Any, result: Any) -> Any:
    """The iteration that stopped the run on a NaN, as the frameworks that log it show it."""
    from types import SimpleNamespace
    last = result.iterations[-1] if result.iterations else None
    it = result.failed_at
    return SimpleNamespace(iteration=it, consumed_samples=it * train.global_batch_size,
                           elapsed_ms=last.elapsed_ms if last else 10.0, lr=last.lr if last else train.lr,
                           loss=float("nan"), loss_scale=last.loss_scale if last else 1.0,
                           grad_norm=float("nan"), skipped=0, nan=1,
                           timestamp=(last.timestamp + 0.01) if last else 0.0)


def _ds_stamp(ts: float) -> str:
    return _dt(ts).strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]


def deepspeed_lines(rec: Any, prev_scale: float | None, hysteresis: list[int], train: Any) -> list[str]:
    """The DeepSpeed lines of one iteration: loss-scaler overflow message, pipeline-engine loss,
    engine progress and timer lines (steps_per_print 1)."""
    st = _ds_stamp(rec.timestamp)
    out = []
    if rec.skipped and prev_scale is not None:
        if rec.loss_scale == prev_scale and hysteresis[0] > 1:
            out.append(f"[{st}] [INFO] [loss_scaler.py:190:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping "
                       f"step. Attempted loss scale: {int(prev_scale)}, but hysteresis is {hysteresis[0]}. "
                       f"Reducing hysteresis to {hysteresis[0] - 1}")
            hysteresis[0] -= 1
        else:
            out.append(f"[{st}] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping "
                       f"step. Attempted loss scale: {int(prev_scale)}, reducing to {int(rec.loss_scale)}")
    elif prev_scale is not None and rec.loss_scale > prev_scale:
        hysteresis[0] = train.hysteresis
    if rec.loss is not None:
        loss = "nan" if rec.loss != rec.loss else f"{rec.loss:0.4f}"
        out.append(f"steps: {rec.iteration} loss: {loss} iter time (s): {rec.elapsed_ms / 1000:.3f} "
                   f"samples/sec: {train.global_batch_size / max(rec.elapsed_ms / 1000, 1e-6):.3f}")
    out.append(f"[{st}] [INFO] [logging.py:96:log_dist] [Rank 0] step={rec.iteration}, "
               f"skipped={rec.skipped_total}, lr={_lr_list(rec)}, "
               f"mom=[({train.adam_beta1:g}, {train.adam_beta2:g}), ({train.adam_beta1:g}, {train.adam_beta2:g})]")
    rate = train.global_batch_size / max(rec.elapsed_ms / 1000, 1e-6)
    out.append(f"[{st}] [INFO] [timer.py:260:stop] epoch=0/micro_step={rec.iteration}/global_step="
               f"{rec.iteration}, RunningAvgSamplesPerSec={rate:.6f}, CurrSamplesPerSec={rate:.6f}, "
               "MemAllocated=0.02GB, MaxMemAllocated=0.03GB")
    return out


def _deepspeed_log(train: Any, side: str, result: Any, started: float) -> str:
    st = _ds_stamp(started)
    lines = [f"[{st}] [INFO] [real_accelerator.py:203:get_accelerator] Setting ds_accelerator to "
             f"{'npu (auto detect)' if side == 'npu' else 'cuda (auto detect)'}",
             f"[{st}] [INFO] [comm.py:652:init_distributed] cdb=None",
             f"[{st}] [INFO] [logging.py:96:log_dist] [Rank 0] DeepSpeed info: version=0.15.1, git-hash=unknown, "
             "git-branch=unknown",
             f"[{st}] [INFO] [config.py:1000:print] DeepSpeedEngine configuration:",
             f"[{st}] [INFO] [config.py:1004:print]   fp16_enabled ................. {train.fp16}",
             f"[{st}] [INFO] [config.py:1004:print]   bfloat16_enabled ............. {train.bf16}",
             f"[{st}] [INFO] [config.py:1004:print]   gradient_clipping ............ {train.clip_grad}",
             f"[{st}] [INFO] [config.py:1004:print]   steps_per_print .............. 1",
             f"[{st}] [INFO] [config.py:1004:print]   train_micro_batch_size_per_gpu  {train.micro_batch_size}"]
    prev, hyst, total = None, [train.hysteresis], 0
    from types import SimpleNamespace
    for rec in result.iterations:
        total += rec.skipped
        r = SimpleNamespace(**vars(rec), skipped_total=total)
        lines += deepspeed_lines(r, prev if train.fp16 else None, hyst, train)
        prev = rec.loss_scale
    if result.failed_at is not None:
        fake = _failed_record(train, result)
        fake.skipped_total = total
        lines += deepspeed_lines(fake, None, hyst, train)
        lines.append("RuntimeError: the loss is NaN: stopping (check_for_nan)")
    return "\n".join(lines) + "\n"


def hf_line(rec: Any, train: Any) -> str:
    epoch = round(rec.consumed_samples / 1000.0, 2)
    loss = rec.loss
    if loss is None or loss != loss:
        loss = 0.0   # logging_nan_inf_filter (default on) drops a NaN step from the logged average
    gn = "nan" if rec.grad_norm is None or rec.grad_norm != rec.grad_norm else repr(float(rec.grad_norm))
    return (f"{{'loss': {round(loss, 4)!r}, 'grad_norm': {gn}, 'learning_rate': {rec.lr!r}, "
            f"'epoch': {epoch!r}}}")


def _hf_log(train: Any, result: Any, started: float) -> str:
    lines = ["***** Running training *****", "  Num examples = 1,000", "  Num Epochs = 1",
             f"  Instantaneous batch size per device = {train.micro_batch_size}",
             f"  Total train batch size (w. parallel, distributed & accumulation) = {train.global_batch_size}",
             "  Gradient Accumulation steps = 1", f"  Total optimization steps = {train.train_iters}",
             f"  Number of trainable parameters = {result.num_parameters:,}"]
    lines += [hf_line(rec, train) for rec in result.iterations]
    if result.failed_at is not None:
        lines.append(hf_line(_failed_record(train, result), train))
    else:
        total = sum(r.elapsed_ms for r in result.iterations) / 1000.0 or 1.0
        losses = [r.loss for r in result.iterations if r.loss is not None]
        lines.append(f"{{'train_runtime': {total:.4f}, 'train_samples_per_second': "
                     f"{train.global_batch_size * train.train_iters / total:.3f}, 'train_steps_per_second': "
                     f"{train.train_iters / total:.3f}, 'train_loss': {sum(losses) / max(1, len(losses))!r}, "
                     f"'epoch': {round(train.train_iters * train.global_batch_size / 1000.0, 2)!r}}}")
    return "\n".join(lines) + "\n"


def titan_line(rec: Any) -> str:
    stamp = _dt(rec.timestamp).strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]
    loss = float("nan") if rec.loss is None else rec.loss
    gn = float("nan") if rec.grad_norm is None else rec.grad_norm
    return (f"[rank0]:[titan] {stamp} - root - INFO - step: {rec.iteration:2}  loss: {loss:8.5f}  "
            f"grad_norm: {gn:7.4f}  memory:  0.03GiB(0.04%)  tps: {8 * 1000:,}  tflops: 0.00  mfu: 0.00%")


def _titan_log(train: Any, result: Any, started: float) -> str:
    stamp = _dt(started).strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]
    head = f"[rank0]:[titan] {stamp} - root - INFO - "
    lines = [head + "Starting job: tinygpt training", head + "Building 1-D device mesh with ['dp_shard'], [1]",
             head + f"Model tinygpt debugmodel size: {result.num_parameters:,} total parameters",
             head + f"Training starts at step 1, with local batch size {train.micro_batch_size}, global batch size "
             f"{train.global_batch_size}, sequence length {train.model.seq_length}, total steps "
             f"{train.train_iters} (warmup {train.lr_warmup_iters})"]
    lines += [titan_line(rec) for rec in result.iterations]
    if result.failed_at is not None:
        lines.append(titan_line(_failed_record(train, result)))
        lines.append(head.replace("INFO", "ERROR") + "Loss is NaN, stopping training")
    else:
        lines.append(head + "Training completed")
    return "\n".join(lines) + "\n"


def render_log(fmt: str, train: Any, side: str, result: Any, started: float) -> str:
    """The console log of one run in one trainer's format."""
    if fmt == "megatron" or (fmt == "mindspeed" and side == "gpu"):
        return train_log(train, side, result, started)
    if fmt == "mindspeed":
        return _mindspeed_fsdp2_log(train, result, started)
    if fmt == "deepspeed":
        return _deepspeed_log(train, side, result, started)
    if fmt == "hf":
        return _hf_log(train, result, started)
    if fmt == "torchtitan":
        return _titan_log(train, result, started)
    raise ValueError(f"unknown log format {fmt!r}")


def _ds_config(train: Any) -> dict[str, Any]:
    return {"train_batch_size": train.global_batch_size,
            "train_micro_batch_size_per_gpu": train.micro_batch_size, "steps_per_print": 1,
            "gradient_clipping": train.clip_grad,
            "optimizer": {"type": "AdamW", "params": {"lr": train.lr, "betas": [train.adam_beta1, train.adam_beta2],
                                                      "eps": train.adam_eps, "weight_decay": train.weight_decay}},
            "scheduler": {"type": "WarmupCosineLR",
                          "params": {"total_num_steps": train.train_iters, "warmup_num_steps": train.lr_warmup_iters,
                                     "cos_min_ratio": train.min_lr / train.lr}},
            "fp16": {"enabled": train.fp16, "initial_scale_power": 16, "loss_scale_window": train.loss_scale_window,
                     "hysteresis": train.hysteresis, "min_loss_scale": train.min_loss_scale},
            "bf16": {"enabled": train.bf16}, "zero_optimization": {"stage": 0}, "wall_clock_breakdown": False}


def _model_flags(train: Any, side: str) -> list[str]:
    m, s = train.model, SIDES[side]
    return [f"--num-layers {m.num_layers}", f"--hidden-size {m.hidden_size}",
            f"--num-attention-heads {m.num_attention_heads}", f"--seq-length {m.seq_length}",
            f"--max-position-embeddings {m.seq_length}", f"--vocab-size {m.vocab_size}",
            f"--hidden-dropout {m.dropout:g}", f"--attention-dropout {m.dropout:g}",
            f"--init-method-std {m.init_method_std:g}",
            f"--data-path {s['data_root']}/dataset/{train.data_path}", f"--load {s['data_root']}/{train.load}",
            f"--seed {train.seed if train.seed_fixed else '$RANDOM'}", f"--train-iters {train.train_iters}"]


def _script(head_lines: list[str], command: str, flags: list[str]) -> str:
    body = " \\\n    ".join([command] + flags)
    return "#!/bin/bash\n\n" + "\n".join(head_lines) + "\n\n" + body + " \\\n    2>&1 | tee logs/train.log\n"


def _env_head(side: str) -> list[str]:
    if side == "npu":
        return ["source /usr/local/Ascend/ascend-toolkit/set_env.sh", "export HCCL_CONNECT_TIMEOUT=1200",
                "export TASK_QUEUE_ENABLE=2"]
    return ["export NCCL_DEBUG=WARN"]


def _hf_flags(train: Any, side: str) -> list[str]:
    s = SIDES[side]
    flags = [f"--model_name_or_path {s['data_root']}/{train.load}-hf",
             f"--train_file {s['data_root']}/dataset/{train.data_path}.jsonl",
             f"--per_device_train_batch_size {train.micro_batch_size}", "--gradient_accumulation_steps 1",
             f"--learning_rate {train.lr:g}", "--lr_scheduler_type cosine", f"--warmup_steps {train.lr_warmup_iters}",
             f"--max_steps {train.train_iters}", f"--weight_decay {train.weight_decay:g}",
             f"--adam_beta1 {train.adam_beta1:g}", f"--adam_beta2 {train.adam_beta2:g}",
             f"--adam_epsilon {train.adam_eps:g}", f"--max_grad_norm {train.clip_grad:g}",
             f"--block_size {train.model.seq_length}", "--logging_steps 1", "--output_dir ./out"]
    if train.seed_fixed:
        flags.append(f"--seed {train.seed}")
    if train.bf16:
        flags.append("--bf16")
    if train.fp16:
        flags.append("--fp16")
    return flags


def _hf_model_config(train: Any) -> dict[str, Any]:
    m = train.model
    return {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_layer": m.num_layers,
            "n_embd": m.hidden_size, "n_head": m.num_attention_heads, "n_positions": m.seq_length,
            "vocab_size": m.vocab_size, "initializer_range": m.init_method_std, "attn_pdrop": m.dropout,
            "resid_pdrop": m.dropout, "embd_pdrop": m.dropout, "layer_norm_epsilon": m.norm_epsilon}


def _titan_toml(train: Any, side: str) -> str:
    s, m = SIDES[side], train.model
    dtype = "bfloat16" if train.bf16 else "float32"
    seed = f"seed = {train.seed}\n" if train.seed_fixed else ""
    return (f"[job]\ndump_folder = \"./outputs\"\ndescription = \"tinygpt training\"\n\n"
            f"[model]\nname = \"tinygpt\"\nflavor = \"debugmodel\"\n\n"
            f"[optimizer]\nname = \"AdamW\"\nlr = {train.lr!r}\neps = {train.adam_eps!r}\n"
            f"weight_decay = {train.weight_decay!r}\n\n"
            f"[lr_scheduler]\nwarmup_steps = {train.lr_warmup_iters}\ndecay_type = \"cosine\"\n"
            f"min_lr_factor = {train.min_lr / train.lr!r}\n\n"
            f"[training]\nlocal_batch_size = {train.micro_batch_size}\nseq_len = {m.seq_length}\n"
            f"max_norm = {train.clip_grad!r}\nsteps = {train.train_iters}\nmixed_precision_param = \"{dtype}\"\n"
            f"dataset_path = \"{s['data_root']}/dataset/{train.data_path}\"\n{seed}\n"
            f"[checkpoint]\ninitial_load_path = \"{s['data_root']}/{train.load}\"\n")


def write_configs(run_dir: Path, fmt: str, train: Any, side: str) -> None:
    """The launch script and config files a run of this trainer keeps."""
    if fmt in ("megatron", "mindspeed"):
        (run_dir / "pretrain_gpt.sh").write_text(launch_script(train, side), encoding="utf-8")
    elif fmt == "deepspeed":
        (run_dir / "ds_config.json").write_text(json.dumps(_ds_config(train), indent=2) + "\n", encoding="utf-8")
        flags = ["--deepspeed", "--deepspeed_config ds_config.json"] + _model_flags(train, side)
        (run_dir / "run_train.sh").write_text(_script(_env_head(side), "deepspeed --num_gpus 1 pretrain_gpt.py", flags),
                                              encoding="utf-8")
    elif fmt == "hf":
        (run_dir / "run_train.sh").write_text(_script(_env_head(side), "torchrun --nproc_per_node 1 run_clm.py",
                                                      _hf_flags(train, side)), encoding="utf-8")
        (run_dir / "config.json").write_text(json.dumps(_hf_model_config(train), indent=2) + "\n", encoding="utf-8")
    elif fmt == "torchtitan":
        (run_dir / "train_config.toml").write_text(_titan_toml(train, side), encoding="utf-8")
        (run_dir / "run_train.sh").write_text(
            _script(_env_head(side), "torchrun --nproc_per_node=1 -m torchtitan.train",
                    ["--job.config_file train_config.toml"]), encoding="utf-8")
    else:
        raise ValueError(f"unknown log format {fmt!r}")


_FORMAT_PIP = {"deepspeed": ["deepspeed==0.15.1"], "hf": ["accelerate==0.33.0", "transformers==4.44.2"],
               "torchtitan": ["torchtitan==0.1.0"], "mindspeed": [], "megatron": []}
