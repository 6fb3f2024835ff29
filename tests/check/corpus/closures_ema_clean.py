"""LBFGS with a closure, an EMA copy of the weights, and Lightning manual optimization."""
import copy

import pytorch_lightning as pl
import torch
from torch import nn


def fit_lbfgs(model, x, y, steps=20):
    optimizer = torch.optim.LBFGS(model.parameters(), lr=0.5)
    loss_fn = nn.MSELoss()
    trace = []

    def closure():
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        return loss

    for _ in range(steps):
        loss = optimizer.step(closure)
        trace.append(loss.item())
    return trace


class EMA:
    def __init__(self, model, decay=0.999):
        self.shadow = copy.deepcopy(model).eval()
        self.decay = decay
        for p in self.shadow.parameters():
            p.requires_grad_(False)

    @torch.no_grad()
    def update(self, model):
        for ema_p, p in zip(self.shadow.parameters(), model.parameters()):
            ema_p.mul_(self.decay).add_(p.detach(), alpha=1 - self.decay)


def fit_with_ema(model, loader, epochs=2):
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ema = EMA(model)
    for epoch in range(epochs):
        for x, y in loader:
            optimizer.zero_grad(set_to_none=True)
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
            ema.update(model)
    return ema.shadow


class ManualGAN(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.automatic_optimization = False
        self.generator = nn.Linear(8, 16)
        self.critic = nn.Linear(16, 1)

    def training_step(self, batch, batch_idx):
        opt_g, opt_c = self.optimizers()
        fake = self.generator(torch.randn(batch.size(0), 8))
        loss_c = self.critic(fake.detach()).mean() - self.critic(batch).mean()
        opt_c.zero_grad()
        self.manual_backward(loss_c)
        opt_c.step()
        loss_g = -self.critic(fake).mean()
        opt_g.zero_grad()
        self.manual_backward(loss_g)
        opt_g.step()
        self.log_dict({"loss_c": loss_c, "loss_g": loss_g})

    def configure_optimizers(self):
        return (torch.optim.Adam(self.generator.parameters(), lr=1e-4),
                torch.optim.Adam(self.critic.parameters(), lr=1e-4))
