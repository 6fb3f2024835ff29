"""Step-based training with a while loop and an infinite data iterator."""
import itertools

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(6, 32), nn.SiLU(), nn.Linear(32, 1))

    def forward(self, x):
        return self.net(x)


class Run:
    def __init__(self):
        self.model = Regressor()
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3)
        self.metrics = {"loss": 0.0, "steps": 0}
        self.best = []

    def train(self, max_steps=100):
        data = DataLoader(TensorDataset(torch.randn(64, 6), torch.randn(64, 1)), batch_size=8)
        batches = itertools.cycle(data)
        step = 0
        while step < max_steps:
            x, y = next(batches)
            pred = self.model(x)
            loss = F.smooth_l1_loss(pred, y)
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
            self.metrics["loss"] += loss  # expect: TV001
            self.metrics["steps"] += 1
            self.best.append(pred)  # expect: TV001
            step += 1


if __name__ == "__main__":
    Run().train()
