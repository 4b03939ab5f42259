"""The demo's tiny GPT, laid out and named like Megatron-LM's local GPT (so its msprobe module
names read like a real Megatron dump: Module.module.module.decoder.layers.0.mlp...)."""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class ModelConfig:
    vocab_size: int = 64
    hidden_size: int = 32
    ffn_hidden_size: int = 128
    num_layers: int = 2
    num_attention_heads: int = 4
    seq_length: int = 32
    init_method_std: float = 0.02
    norm_epsilon: float = 1e-5
    post_norm: bool = False  # the "wiring" fault
    parallel_residual: bool = False  # the "wiring" fault, other variant: attention and MLP side by side
    padded_vocab: int | None = None  # embedding / output rows (Megatron pads the vocabulary)
    dropout: float = 0.0             # attention and hidden dropout

    @property
    def rows(self) -> int:
        return self.padded_vocab or self.vocab_size


class ColumnParallelLinear(nn.Module):
    def __init__(self, inp: int, out: int, std: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(out, inp).normal_(0.0, std))
        self.bias = nn.Parameter(torch.zeros(out))

    def forward(self, x):
        return F.linear(x, self.weight, self.bias)


class RowParallelLinear(ColumnParallelLinear):
    pass


class FusedLayerNorm(nn.Module):
    def __init__(self, hidden: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))
        self.bias = nn.Parameter(torch.zeros(hidden))
        self.eps = eps
        self.hidden = hidden

    def forward(self, x):
        return F.layer_norm(x, (self.hidden,), self.weight, self.bias, self.eps)


class VocabParallelEmbedding(nn.Module):
    def __init__(self, vocab: int, hidden: int, std: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(vocab, hidden).normal_(0.0, std))

    def forward(self, ids):
        return F.embedding(ids, self.weight)


class LanguageModelEmbedding(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.word_embeddings = VocabParallelEmbedding(cfg.rows, cfg.hidden_size, cfg.init_method_std)
        self.dropout = cfg.dropout
        self.position_embeddings = nn.Embedding(cfg.seq_length, cfg.hidden_size)
        nn.init.normal_(self.position_embeddings.weight, 0.0, cfg.init_method_std)

    def forward(self, ids, position_ids):
        x = self.word_embeddings(ids) + self.position_embeddings(position_ids)
        return F.dropout(x, p=self.dropout, training=self.training)


class DotProductAttention(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.head_dim = cfg.hidden_size // cfg.num_attention_heads
        self.dropout = cfg.dropout

    def forward(self, q, k, v, mask):
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.head_dim)
        scores = scores.masked_fill(mask, float("-inf"))
        probs = F.softmax(scores, dim=-1)
        probs = F.dropout(probs, p=self.dropout, training=self.training)
        return torch.matmul(probs, v)


class SelfAttention(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.heads = cfg.num_attention_heads
        self.linear_qkv = ColumnParallelLinear(cfg.hidden_size, 3 * cfg.hidden_size, cfg.init_method_std)
        self.core_attention = DotProductAttention(cfg)
        self.linear_proj = RowParallelLinear(cfg.hidden_size, cfg.hidden_size,
                                             cfg.init_method_std / math.sqrt(2 * cfg.num_layers))

    def forward(self, x, mask):
        b, s, h = x.shape
        q, k, v = self.linear_qkv(x).reshape(b, s, self.heads, 3 * h // self.heads).transpose(1, 2).chunk(3, dim=-1)
        ctx = self.core_attention(q, k, v, mask)
        return self.linear_proj(ctx.transpose(1, 2).reshape(b, s, h))


class MLP(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.linear_fc1 = ColumnParallelLinear(cfg.hidden_size, cfg.ffn_hidden_size, cfg.init_method_std)
        self.linear_fc2 = RowParallelLinear(cfg.ffn_hidden_size, cfg.hidden_size,
                                            cfg.init_method_std / math.sqrt(2 * cfg.num_layers))

    def forward(self, x):
        return self.linear_fc2(F.gelu(self.linear_fc1(x)))


class TransformerLayer(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.post_norm = cfg.post_norm
        self.parallel_residual = cfg.parallel_residual
        self.dropout = cfg.dropout
        self.input_layernorm = FusedLayerNorm(cfg.hidden_size, cfg.norm_epsilon)
        self.self_attention = SelfAttention(cfg)
        self.pre_mlp_layernorm = FusedLayerNorm(cfg.hidden_size, cfg.norm_epsilon)
        self.mlp = MLP(cfg)

    def forward(self, x, mask):
        p = self.dropout
        if self.post_norm:
            x = self.input_layernorm(x + F.dropout(self.self_attention(x, mask), p=p, training=self.training))
            return self.pre_mlp_layernorm(x + F.dropout(self.mlp(x), p=p, training=self.training))
        if self.parallel_residual:
            attn = F.dropout(self.self_attention(self.input_layernorm(x), mask), p=p, training=self.training)
            return x + attn + F.dropout(self.mlp(self.pre_mlp_layernorm(x)), p=p, training=self.training)
        x = x + F.dropout(self.self_attention(self.input_layernorm(x), mask), p=p, training=self.training)
        return x + F.dropout(self.mlp(self.pre_mlp_layernorm(x)), p=p, training=self.training)


class TransformerBlock(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.layers = nn.ModuleList(TransformerLayer(cfg) for _ in range(cfg.num_layers))
        self.final_layernorm = FusedLayerNorm(cfg.hidden_size, cfg.norm_epsilon)

    def forward(self, x, mask):
        for layer in self.layers:
            x = layer(x, mask)
        return self.final_layernorm(x)


class GPTModel(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.embedding = LanguageModelEmbedding(cfg)
        self.decoder = TransformerBlock(cfg)
        self.output_layer = ColumnParallelLinear(cfg.hidden_size, cfg.rows, cfg.init_method_std)

    def forward(self, ids, position_ids, mask):
        return self.output_layer(self.decoder(self.embedding(ids, position_ids), mask))


class Float16Module(nn.Module):
    """Megatron's precision wrapper; here only a pass-through that keeps the module path."""

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.module = module

    def forward(self, *args):
        return self.module(*args)


class DistributedDataParallel(nn.Module):
    """Single-process stand-in for Megatron's DDP wrapper (the probe's root, not dumped)."""

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.module = module

    def forward(self, *args):
        return self.module(*args)


def build_model(cfg: ModelConfig, seed: int) -> DistributedDataParallel:
    """Same seed, same weights: both sides start from the same checkpoint."""
    generator_state = torch.get_rng_state()
    torch.manual_seed(seed)
    model = DistributedDataParallel(Float16Module(GPTModel(cfg)))
    torch.set_rng_state(generator_state)
    return model


def lm_loss(logits, labels, loss_mask, variant: str | None = None):
    """Megatron's masked mean of per-token cross entropy. ``variant`` (the loss_definition
    fault) divides the same sum by something else: ``per_sample_sum`` by the number of samples
    (a per-sample sum, averaged), ``grad_acc_twice`` by twice the token count (the loss divided
    by the accumulation steps once more)."""
    losses = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), reduction="none")
    total = (losses * loss_mask.reshape(-1)).sum()
    if variant == "per_sample_sum":
        return total / loss_mask.shape[0]
    if variant == "grad_acc_twice":
        return total / (2 * loss_mask.numel())
    return total / loss_mask.sum()
