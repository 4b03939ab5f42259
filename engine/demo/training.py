"""The demo's training loop: synthetic structured data, AdamW with Megatron's warmup+cosine
schedule, clipping, an optional fp16-style dynamic loss scaler, and probe capture of one step.
Returns one record per iteration; rendering the log is artefacts.py's job."""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from precdx.demo.device import DeviceProfile, device_numerics
from precdx.demo.model import ModelConfig, build_model, lm_loss
from precdx.probe.recorder import Probe


@dataclass(frozen=True)
class TrainConfig:
    """The settings a launch script states (GPT_ARGS); artefacts.py renders them."""

    model: ModelConfig = ModelConfig()
    micro_batch_size: int = 8
    global_batch_size: int = 8
    lr: float = 5e-3
    min_lr: float = 5e-4
    lr_warmup_iters: int = 5
    train_iters: int = 40
    weight_decay: float = 0.01
    adam_beta1: float = 0.9
    adam_beta2: float = 0.95
    adam_eps: float = 1e-8
    clip_grad: float = 1.0
    seed: int = 1234
    fp16: bool = False
    initial_loss_scale: int = 65536
    min_loss_scale: float = 1.0
    loss_scale_window: int = 100
    hysteresis: int = 2
    token_offset: int = 0       # the data_preprocessing fault
    data_path: str = "synth_text_document"
    data_seed: int | None = None    # None: the seed (the data_preprocessing "order" variant differs)
    out_of_vocab: float = 0.0       # share of tokens with ids beyond the vocabulary (input_id_out_of_range)
    bf16: bool = False              # train in bf16 (the precision fault)
    seed_fixed: bool = True         # False: the launch draws its own seed (dropout masks differ)
    loss_variant: str | None = None     # loss_definition fault: how the loss is reduced
    optimizer_bug: str | None = None    # optimizer_update fault: what the AdamW gets wrong
    optimizer_bug_from: int = 1         # ... from this update on (1 = the first)
    load: str = "ckpt/tinygpt-mcore"    # checkpoint the run starts from (under the data root)


@dataclass
class IterationRecord:
    iteration: int
    consumed_samples: int
    elapsed_ms: float
    lr: float
    loss: float | None
    loss_scale: float
    grad_norm: float | None
    skipped: int
    nan: int
    timestamp: float


@dataclass
class RunResult:
    iterations: list[IterationRecord] = field(default_factory=list)
    failed_at: int | None = None  # iteration whose NaN grad norm stopped the run
    num_parameters: int = 0


def make_batch(cfg: TrainConfig, iteration: int, data_seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Arithmetic-progression sequences (start, stride) mod (vocab - 4): a pattern the model
    can learn, so the loss falls. ``token_offset`` shifts ids like a different vocabulary;
    ``out_of_vocab`` moves a share of the ids into the padded rows beyond the vocabulary."""
    if cfg.data_seed is not None:
        data_seed = cfg.data_seed
    g = torch.Generator().manual_seed(data_seed * 100003 + iteration)
    n, s = cfg.micro_batch_size, cfg.model.seq_length + 1
    usable = cfg.model.vocab_size - 4
    start = torch.randint(0, usable, (n, 1), generator=g)
    stride = torch.randint(1, 4, (n, 1), generator=g)
    seq = (start + stride * torch.arange(s)) % usable + cfg.token_offset
    if cfg.out_of_vocab > 0 and cfg.model.rows > cfg.model.vocab_size:
        beyond = torch.rand(seq.shape, generator=g) < cfg.out_of_vocab
        seq = torch.where(beyond, seq % (cfg.model.rows - cfg.model.vocab_size) + cfg.model.vocab_size, seq)
    return seq[:, :-1].contiguous(), seq[:, 1:].contiguous()


def lr_at(cfg: TrainConfig, num_updates: int) -> float:
    """Megatron's linear warmup then cosine decay to min_lr over train_iters."""
    if num_updates <= cfg.lr_warmup_iters:
        return cfg.lr * num_updates / cfg.lr_warmup_iters
    ratio = (num_updates - cfg.lr_warmup_iters) / max(1, cfg.train_iters - cfg.lr_warmup_iters)
    return cfg.min_lr + (cfg.lr - cfg.min_lr) * 0.5 * (math.cos(math.pi * min(1.0, ratio)) + 1.0)


class DynamicLossScaler:
    """Megatron's DynamicGradScaler: halve after ``hysteresis`` overflows, double after a
    window of clean steps; the hysteresis budget refills only when the scale grows."""

    def __init__(self, cfg: TrainConfig) -> None:
        self.scale = float(cfg.initial_loss_scale) if cfg.fp16 else 1.0
        self.enabled = cfg.fp16
        self.min_scale = cfg.min_loss_scale
        self.window = cfg.loss_scale_window
        self.hysteresis = cfg.hysteresis
        self._hysteresis_left = cfg.hysteresis
        self._growth = 0

    def update(self, found_inf: bool) -> None:
        if not self.enabled:
            return
        if found_inf:
            self._growth = 0
            self._hysteresis_left -= 1
            if self._hysteresis_left <= 0:
                self.scale = max(self.scale / 2.0, self.min_scale)
        else:
            self._growth += 1
            if self._growth == self.window:
                self._growth = 0
                self._hysteresis_left = self.hysteresis
                self.scale *= 2.0


def step_inputs(tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Position ids, causal mask and loss mask for a batch of token ids."""
    seq = tokens.shape[1]
    return (torch.arange(seq), torch.triu(torch.ones(seq, seq, dtype=torch.bool), diagonal=1),
            torch.ones(tokens.shape[0], seq))


def forward_backward(model, tokens: torch.Tensor, labels: torch.Tensor, loss_scale: float,
                     inputs: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None,
                     loss_variant: str | None = None) -> torch.Tensor:
    """One iteration's forward and (loss-scaled) backward: the part of the step a dump covers,
    shared by the training loop and by the watch demo's re-runs and replays."""
    position_ids, mask, loss_mask = inputs if inputs is not None else step_inputs(tokens)
    logits = model(tokens, position_ids, mask)
    if logits.dtype != torch.float32:
        logits = logits.float()   # the loss is computed in fp32 (vocab-parallel cross entropy)
    loss = lm_loss(logits, labels, loss_mask, variant=loss_variant)
    (loss * loss_scale).backward()
    return loss


class TargetAdamW(torch.optim.AdamW):
    """AdamW with one implementation defect from update ``start`` on (the optimizer_update
    fault): ``no_bias_correction`` leaves the moments uncorrected; ``moments_reset`` drops the
    moments at update ``start`` (a resume without the optimizer state) while the step count that
    drives the bias correction goes on, so the next updates are too small; ``bf16_master_weights``
    keeps the updated weights only to bf16 precision."""

    def __init__(self, groups, *, bug: str, start: int, **kw) -> None:
        super().__init__(groups, **kw)
        self.bug, self.start, self.updates = bug, start, 0

    @torch.no_grad()
    def step(self, closure=None):
        self.updates += 1
        if self.updates < self.start:
            return super().step(closure)
        if self.bug == "bf16_master_weights":
            super().step(closure)
            for group in self.param_groups:
                for p in group["params"]:
                    p.copy_(p.to(torch.bfloat16).to(p.dtype))
            return None
        for group in self.param_groups:   # no_bias_correction, moments_reset
            b1, b2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                st = self.state[p]
                if not st:
                    st["step"] = torch.tensor(0.0)
                    st["exp_avg"] = torch.zeros_like(p)
                    st["exp_avg_sq"] = torch.zeros_like(p)
                if self.bug == "moments_reset" and self.updates == self.start:
                    st["exp_avg"].zero_()
                    st["exp_avg_sq"].zero_()
                st["step"] += 1
                p.mul_(1 - group["lr"] * group["weight_decay"])
                st["exp_avg"].lerp_(p.grad, 1 - b1)
                st["exp_avg_sq"].mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
                c1, c2 = 1.0, 1.0
                if self.bug == "moments_reset":   # corrected with the global step, not the restart's
                    t = float(st["step"])
                    c1, c2 = 1 - b1 ** t, 1 - b2 ** t
                denom = (st["exp_avg_sq"] / c2).sqrt().add_(group["eps"])
                p.addcdiv_(st["exp_avg"], denom, value=-group["lr"] / c1)
        return None


@dataclass(frozen=True)
class Injection:
    """What the training loop itself does to the target (faults that live outside the
    operators): ``swap`` replaces a weight with another checkpoint's values before training
    ((parameter path, share of the difference, seed)); ``nan_weight`` writes NaN into a weight
    after one update ((parameter path, 0-based iteration)); ``nan_hook`` patches a kernel the
    dump does not capture behind one module, which writes NaN into its output at one iteration
    ((module path, 0-based iteration))."""

    swap: tuple[str, float, int] | None = None
    nan_weight: tuple[str, int] | None = None
    nan_hook: tuple[str, int] | None = None


def _param(model, path: str) -> torch.nn.Parameter:
    for name, p in model.named_parameters():
        if name.endswith(path):
            return p
    raise KeyError(path)


def train(cfg: TrainConfig, profile: DeviceProfile, *, dump_dir: Path | None = None,
          dump_step: int | list[int] | None = None, summary_mode: str = "statistics", level: str = "mix",
          overflow_from: int | None = None, watch_with=None, monitor_with=None,
          injection: Injection | None = None) -> RunResult:
    """Train ``cfg.train_iters`` iterations under ``profile``; dump step(s) ``dump_step`` (0-based).

    ``overflow_from`` (loss_scale_collapse) makes a target fp16 kernel emit inf into the
    gradients on a growing share of iterations from that iteration on. ``watch_with(model,
    optimizer)`` returns an ``precdx.watch.Watcher`` that gets each iteration's batch and logged
    scalars, before the update (as Megatron checks for NaN before it), can stop the run, and is
    closed when training ends. ``monitor_with(model, optimizer)`` returns a training monitor
    (``precdx.demo.monitoring.TrainingMonitor``) that records every iteration.
    """
    torch.manual_seed(cfg.seed)
    model = build_model(cfg.model, cfg.seed)
    injection = injection or Injection()
    if injection.swap is not None:
        path, share, seed = injection.swap
        p = _param(model, path)
        other = torch.empty_like(p).normal_(0.0, cfg.model.init_method_std,
                                            generator=torch.Generator().manual_seed(seed))
        with torch.no_grad():
            p.add_(share * (other - p))
    if injection.nan_hook is not None:
        path, at = injection.nan_hook
        module = next(m for n, m in model.named_modules() if n.endswith(path))

        def uncaptured_kernel(mod, args, output, _at=at):
            if profile.step == _at:
                with torch.no_grad():
                    output.view(-1, output.shape[-1])[0] = float("nan")
            return output
        module.register_forward_hook(uncaptured_kernel)
    if cfg.bf16:
        model.to(torch.bfloat16)
    if not cfg.seed_fixed:
        torch.manual_seed(profile.launch_seed)   # dropout masks drawn from an unfixed seed
    model.train()
    decay = [p for n, p in model.named_parameters() if p.ndim > 1]
    no_decay = [p for n, p in model.named_parameters() if p.ndim <= 1]
    groups = [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    kw = dict(lr=cfg.lr, betas=(cfg.adam_beta1, cfg.adam_beta2), eps=cfg.adam_eps)
    optimizer = (TargetAdamW(groups, bug=cfg.optimizer_bug, start=cfg.optimizer_bug_from, **kw)
                 if cfg.optimizer_bug else torch.optim.AdamW(groups, **kw))
    scaler = DynamicLossScaler(cfg)
    steps = [dump_step] if isinstance(dump_step, int) else list(dump_step or [])
    probe = Probe(model, dump_dir, level=level, summary_mode=summary_mode,
                  steps=steps, rank=0) if dump_dir else None
    inputs = step_inputs(torch.zeros(cfg.micro_batch_size, cfg.model.seq_length, dtype=torch.long))
    overflow_gen = torch.Generator().manual_seed(cfg.seed + 7)
    result = RunResult(num_parameters=sum(p.numel() for p in model.parameters()))
    watcher = watch_with(model, optimizer) if watch_with is not None else None
    monitor = monitor_with(model, optimizer) if monitor_with is not None else None
    try:
        _loop(cfg, profile, model, optimizer, scaler, probe, inputs, overflow_gen, overflow_from, result,
              watcher, monitor, injection)
    finally:
        if watcher is not None:
            watcher.close()
        if monitor is not None:
            monitor.close()
    return result


def _loop(cfg, profile, model, optimizer, scaler, probe, inputs, overflow_gen, overflow_from, result,
          watcher, monitor, injection) -> None:
    updates = 0
    in_kernel = profile.fault == "loss_scale_collapse" and profile.variant == "kernel"
    with device_numerics(profile, layers=cfg.model.num_layers, steps=cfg.train_iters):
        for it in range(1, cfg.train_iters + 1):
            t0 = time.perf_counter()
            profile.step = it - 1
            lr = lr_at(cfg, updates + 1)
            for group in optimizer.param_groups:
                group["lr"] = lr
            tokens, labels = make_batch(cfg, it, cfg.seed)
            optimizer.zero_grad(set_to_none=True)
            if watcher is not None:
                watcher.batch({"tokens": tokens, "labels": labels, "loss_scale": scaler.scale,
                               "iteration": it, "seed": cfg.seed})
            overflow_now = False
            if overflow_from is not None and it >= overflow_from:
                # share of overflowing iterations grows as training goes on
                share = min(0.9, 0.25 + 0.02 * (it - overflow_from))
                overflow_now = torch.rand((), generator=overflow_gen).item() < share
            profile.overflow_now = overflow_now and in_kernel
            if monitor is not None:
                monitor.begin_step(it - 1)
            if probe is not None:
                probe.start()
            try:
                loss = forward_backward(model, tokens, labels, scaler.scale, inputs, loss_variant=cfg.loss_variant)
            finally:
                if probe is not None:
                    probe.stop()
                    probe.step()
            grads = [p.grad for p in model.parameters() if p.grad is not None]
            if overflow_now and not in_kernel:
                grads[-1].view(-1)[0] = float("inf")
            for g in grads:
                g.div_(scaler.scale)
            if monitor is not None:
                monitor.after_backward(it - 1)
            norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.clip_grad))
            loss_value = float(loss.detach())
            found_inf = cfg.fp16 and not math.isfinite(norm)
            stop = watcher is not None and watcher.step(
                loss_value, grad_norm=norm, lr=lr, loss_scale=scaler.scale if cfg.fp16 else None,
                skipped=found_inf)
            if math.isnan(norm) and not cfg.fp16:
                result.failed_at = it
                if monitor is not None:
                    monitor.end_step(it - 1, optimizer, updated=False)
                break
            scaler.update(found_inf)
            if not found_inf:
                if monitor is not None:
                    monitor.before_update(it - 1)
                optimizer.step()
                updates += 1
                if injection.nan_weight is not None and injection.nan_weight[1] == it - 1:
                    with torch.no_grad():
                        _param(model, injection.nan_weight[0]).view(-1)[0] = float("nan")
            if monitor is not None:
                monitor.end_step(it - 1, optimizer, updated=not found_inf)
            elapsed = (time.perf_counter() - t0) * 1000.0
            result.iterations.append(IterationRecord(
                iteration=it, consumed_samples=it * cfg.global_batch_size, elapsed_ms=elapsed, lr=lr,
                loss=None if found_inf else loss_value, loss_scale=scaler.scale,
                grad_norm=None if found_inf else norm, skipped=int(found_inf), nan=0,
                timestamp=time.time()))
            if stop:
                break
