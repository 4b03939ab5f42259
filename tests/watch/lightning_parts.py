"""A tiny randomly initialised Lightning module and its data (no downloads); ``make_module``
is also the replay --model-fn of the captured case."""
from __future__ import annotations

import lightning.pytorch as pl
import torch
from torch import nn


class Tiny(pl.LightningModule):
    def __init__(self, lr: float = 1e-2) -> None:
        super().__init__()
        self.save_hyperparameters()
        torch.manual_seed(0)
        self.net = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return nn.functional.mse_loss(self(x), y)

    def on_before_optimizer_step(self, optimizer):
        norm = torch.nn.utils.get_total_norm([p.grad for p in self.parameters() if p.grad is not None])
        self.log("grad_norm", norm)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)


def loader():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(64, 8, generator=g)
    y = x[:, :1] * 2.0 - x[:, 1:2]
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=8)


def make_module():
    return Tiny()
