"""Small torch models shared by the probe tests."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


class Attn(nn.Module):
    def __init__(self, d: int = 16, h: int = 2) -> None:
        super().__init__()
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.h = h

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q = q.view(b, t, self.h, -1).transpose(1, 2)
        k = k.view(b, t, self.h, -1).transpose(1, 2)
        v = v.view(b, t, self.h, -1).transpose(1, 2)
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(d // self.h)
        attn = F.softmax(scores, dim=-1)
        return self.proj(torch.matmul(attn, v).transpose(1, 2).reshape(b, t, d))


class TinyLM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(32, 16)
        self.ln = nn.LayerNorm(16)
        self.attn = Attn()
        self.head = nn.Linear(16, 32)

    def forward(self, x):
        h = self.emb(x)
        h = h + self.attn(self.ln(h))
        h = F.gelu(h)
        return self.head(h)


def make_step(model: nn.Module, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, 32, (2, 8), generator=g)
    y = torch.randint(0, 32, (2, 8), generator=g)

    def step():
        out = model(x)
        loss = F.cross_entropy(out.view(-1, 32), y.view(-1))
        loss.backward()
        return loss
    return step
