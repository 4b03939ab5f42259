"""Runs one demo case: the baseline, the faulty target (and its rerun when the fault needs
one), then writes the case folder in the scenario layout with its expected.yaml.

``run_case(fault, out)`` is the classic demo (Megatron logs, the fault's defaults);
``run_case(fault, out, params=sample_params(...))`` builds a seeded lab case of the evaluation
matrix: another model size, fault step, strength, operator and log format, every run dumped
and monitored."""
from __future__ import annotations

import dataclasses
import random
import shutil
import time
from pathlib import Path

import torch

from precdx.demo import artefacts
from precdx.demo.catalogue import FAULTS, Fault, LabParams
from precdx.demo.device import DeviceProfile, stomp_site
from precdx.demo.model import ModelConfig
from precdx.demo.training import Injection, TrainConfig, train
from precdx.errors import PrecdxError

MIN_STEPS = 8
_PARAM = {"word_embeddings": "embedding.word_embeddings.weight",
          "position_embeddings": "embedding.position_embeddings.weight",
          "output_layer": "output_layer.weight",
          "linear_fc1": "decoder.layers.0.mlp.linear_fc1.weight",
          "linear_qkv": "decoder.layers.0.self_attention.linear_qkv.weight"}
_HOOKED = {"after_qkv": "self_attention.linear_qkv", "after_fc1": "mlp.linear_fc1"}


def _model(params: LabParams) -> ModelConfig:
    return ModelConfig(vocab_size=params.vocab, hidden_size=params.hidden, ffn_hidden_size=4 * params.hidden,
                       num_layers=params.layers, num_attention_heads=params.heads, seq_length=params.seq)


def _configs(fault: Fault, steps: int, seed: int, params: LabParams | None = None) -> tuple[TrainConfig, TrainConfig]:
    p = (params or LabParams()).pick(fault)
    base = TrainConfig(model=_model(p), train_iters=steps, seed=seed, lr_warmup_iters=max(1, steps // 8))
    target = base
    s = p.strength
    name = fault.name
    if name == "hyperparameter":
        if p.variant == "lr_warmup_iters":
            target = dataclasses.replace(base, lr_warmup_iters=max(base.lr_warmup_iters + 1,
                                                                   round(base.lr_warmup_iters * (s or 2.0))))
        elif p.variant == "adam_eps":
            target = dataclasses.replace(base, adam_eps=1e-4 * (s or 2.0))
        else:
            target = dataclasses.replace(base, lr=base.lr * (s or 2.0))
    elif name == "data_preprocessing":
        if p.variant == "order":
            target = dataclasses.replace(base, data_seed=seed + 17, data_path="synth_text_reshuffled_document")
        else:
            target = dataclasses.replace(base, token_offset=max(1, round(s or 2.0)), data_path="synth_text_v2_document")
    elif name == "wiring":
        key = "parallel_residual" if p.variant == "parallel_residual" else "post_norm"
        target = dataclasses.replace(base, model=dataclasses.replace(base.model, **{key: True}))
    elif name == "loss_scale_collapse":
        base = dataclasses.replace(base, fp16=True)
        target = dataclasses.replace(target, fp16=True)
    elif name == "weight_init":
        target = dataclasses.replace(base, load="ckpt/tinygpt-mcore-converted")
    elif name == "optimizer_update":
        target = dataclasses.replace(base, optimizer_bug=p.variant,
                                     optimizer_bug_from=(p.fault_step or 0) + 1 if params else 1)
    elif name == "precision":
        target = dataclasses.replace(base, bf16=True)
    elif name == "loss_definition":
        target = dataclasses.replace(base, loss_variant=p.variant)
    elif name == "randomness":
        base = dataclasses.replace(base, model=dataclasses.replace(base.model, dropout=0.1))
        target = dataclasses.replace(base, seed_fixed=False)
    elif name == "input_id_out_of_range":
        padded = base.model.vocab_size + (-base.model.vocab_size) % 128
        base = dataclasses.replace(base, out_of_vocab=s or 0.2,
                                   model=dataclasses.replace(base.model, padded_vocab=padded))
        target = base
    return base, target


def _nan_step(steps: int) -> int:
    """0-based step at which the nan_op fault fires: late enough to show a healthy start."""
    return max(2, (steps * 2) // 3)


def fault_step(fault: Fault, steps: int, params: LabParams | None) -> int:
    """0-based iteration where the fault fires (one-off faults) or starts."""
    if params is not None and params.fault_step is not None:
        return min(params.fault_step, steps - 3)
    if fault.name in ("optimizer_update",):
        return 0
    if fault.name == "loss_scale_collapse":
        return max(3, steps // 4) - 1   # overflows from iteration max(3, steps // 4) (1-based) on
    if fault.name == "bf16_embedding_grad":
        return max(2, steps // 4)
    return _nan_step(steps)


def _first_overflow(cfg: TrainConfig, overflow_from: int) -> int:
    """0-based iteration of the first overflow (the training loop's own draws, replayed)."""
    gen = torch.Generator().manual_seed(cfg.seed + 7)
    for it in range(overflow_from, cfg.train_iters + 1):
        share = min(0.9, 0.25 + 0.02 * (it - overflow_from))
        if torch.rand((), generator=gen).item() < share:
            return it - 1
    return overflow_from - 1


def dump_steps(fault: Fault, steps: int, params: LabParams | None, cfg: TrainConfig) -> list[int]:
    """The iterations (0-based) a user dumps for this fault: where it shows first."""
    f = fault_step(fault, steps, params)
    name = fault.name
    if name in ("nan_op", "memory_stomp", "nan_unhooked", "bf16_embedding_grad"):
        return [f]
    if name == "nan_weight":
        return [f + 1]
    if name == "optimizer_update":
        return [f, f + 1]
    if name == "hyperparameter":
        return [0, 1]
    if name == "loss_scale_collapse":
        return [_first_overflow(cfg, f + 1)]
    return [0]


def _launch_seeds(fault: Fault, seed: int, roles: tuple[str, ...], layers: int) -> dict[str, int]:
    seeds = {r: seed + 100 + len(r) for r in roles}
    if fault.name == "memory_stomp" and "target_rerun" in seeds:
        # a stomp lands somewhere else in every launch
        while stomp_site(seeds["target_rerun"], layers) == stomp_site(seeds["target"], layers):
            seeds["target_rerun"] += 1
    return seeds


def run_case(fault_name: str, out_dir: Path, *, steps: int = 40, seed: int = 1234,
             params: LabParams | None = None, dump_runs: tuple[str, ...] | None = None,
             level: str | None = None, summary_mode: str | None = None, monitor: bool | None = None) -> Path:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a model this small only loses time to thread hand-offs
    try:
        return _run_case(fault_name, out_dir, steps, seed, params, dump_runs, level, summary_mode, monitor)
    finally:
        torch.set_num_threads(threads)


def _run_case(fault_name: str, out_dir: Path, steps: int, seed: int, params: LabParams | None,
              dump_runs: tuple[str, ...] | None, level: str | None, summary_mode: str | None,
              monitor: bool | None) -> Path:
    fault = FAULTS.get(fault_name)
    if fault is None:
        raise PrecdxError(f"unknown demo fault {fault_name!r}; choose one of {', '.join(FAULTS)}")
    if steps < MIN_STEPS:
        raise PrecdxError(f"the demo needs at least {MIN_STEPS} steps to show a trend (got {steps})")
    if out_dir.exists() and any(out_dir.iterdir()):
        if not (out_dir / "expected.yaml").is_file():
            raise PrecdxError("output folder exists and is not a demo case; refusing to overwrite it",
                              path=str(out_dir))
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)

    p = (params or LabParams()).pick(fault)
    level = level or p.level
    summary = summary_mode or p.summary_mode or "statistics"
    with_monitor = p.monitor if monitor is None else monitor
    base_cfg, target_cfg = _configs(fault, steps, seed, params)
    f_step = fault_step(fault, steps, params)
    steps_to_dump = dump_steps(fault, steps, params, target_cfg)
    dumped_runs = fault.dump_runs if dump_runs is None else dump_runs
    if fault.dump_mode is None and dump_runs is None:
        dumped_runs = ()
    launch = _launch_seeds(fault, seed, fault.runs, base_cfg.model.num_layers)
    nan_call = None
    if params is not None and fault.name == "nan_op":
        calls = {"softmax": p.layers, "gelu": p.layers, "layer_norm": 2 * p.layers + 1}[p.operator or "softmax"]
        nan_call = random.Random(f"{seed}:call").randrange(calls)
    for role in fault.runs:
        target = role != "baseline"
        cfg = target_cfg if target else base_cfg
        one_off = fault.name in ("nan_op", "memory_stomp", "bf16_embedding_grad")
        profile = DeviceProfile(target=target, fault=fault.name if target else None,
                                noise_seed=seed + 1, launch_seed=launch[role],
                                nan_step=f_step if one_off else None,
                                operator=p.operator if params is not None else None,
                                strength=p.strength if params is not None else None,
                                variant=p.variant if fault.name == "loss_scale_collapse" else None,
                                nan_call=nan_call,
                                vocab=cfg.model.vocab_size if fault.name in ("input_id_out_of_range",) else
                                cfg.model.rows if fault.name == "bf16_embedding_grad" else None)
        injection = Injection()
        if target and fault.name == "weight_init":
            injection = Injection(swap=(_PARAM[p.variant or "word_embeddings"], p.strength or 1.0, seed + 991))
        elif target and fault.name == "nan_weight":
            injection = Injection(nan_weight=(_PARAM[p.variant or "linear_fc1"], f_step))
        elif target and fault.name == "nan_unhooked":
            layer = random.Random(f"{seed}:layer").randrange(cfg.model.num_layers) if params else 0
            injection = Injection(nan_hook=(f"decoder.layers.{layer}.{_HOOKED[p.variant or 'after_qkv']}", f_step))
        dumped = role in dumped_runs
        run_dir = out_dir / role
        started = time.time()
        monitor_with = None
        if with_monitor:
            from precdx.demo.monitoring import TrainingMonitor
            monitor_with = (lambda model, opt, _dir=run_dir, _t=started, _tag=launch[role]:
                            TrainingMonitor(model, opt, _dir / "monitor_output", record_steps=p.monitor_record_steps,
                                            alerts=p.monitor_alerts, started=_t, tag=_tag))
        overflow = None
        if fault.name == "loss_scale_collapse" and target:
            overflow = f_step + 1
        result = train(cfg, profile, dump_dir=run_dir / "msprobe_dump" if dumped else None,
                       dump_step=steps_to_dump if dumped else None, summary_mode=summary, level=level,
                       overflow_from=overflow, monitor_with=monitor_with, injection=injection)
        probe_config = None
        if dumped:
            probe_config = {"task": "statistics", "dump_path": "./msprobe_dump", "rank": [],
                            "step": steps_to_dump, "level": level, "async_dump": False, "extra_info": True,
                            "statistics": {"scope": [], "list": [], "data_mode": ["all"],
                                           "summary_mode": summary, "tensor_list": []}}
        artefacts.write_run(run_dir, cfg, "npu" if target else "gpu", result, started, probe_config,
                            log_format=p.log_format)
    extra = dict(fault.expected)
    if params is not None:
        extra = {k: v for k, v in extra.items() if k != "api"}
    artefacts.write_expected(out_dir, fault.failure_mode, fault.runs, extra)
    return out_dir
