"""Functions for train/eval with a decorator for evaluation and a checkpoint helper."""
import math

import torch
from torch import nn
from torch.optim import AdamW
from torch.optim.lr_scheduler import CosineAnnealingLR
from torch.utils.data import DataLoader, TensorDataset


def build_model(width: int) -> nn.Module:
    return nn.Sequential(nn.Linear(20, width), nn.GELU(), nn.Linear(width, 1))


def train_one_epoch(model, loader, optimizer, loss_fn, device, log_every=50):
    model.train()
    total, count = 0.0, 0
    for step, (x, y) in enumerate(loader):
        x = x.to(device, non_blocking=True)
        y = y.to(device, non_blocking=True)
        optimizer.zero_grad(set_to_none=True)
        pred = model(x)
        loss = loss_fn(pred, y)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        total += loss.detach() * x.size(0)
        count += x.size(0)
        if step % log_every == 0:
            print(f"step {step}: {loss.item():.4f}")
    return (total / count).item()


@torch.no_grad()
def evaluate(model, loader, loss_fn, device):
    model.eval()
    losses = []
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        losses.append(loss_fn(model(x), y))
    return torch.stack(losses).mean().item()


def main():
    device = torch.device("cpu")
    data = TensorDataset(torch.randn(512, 20), torch.randn(512, 1))
    loader = DataLoader(data, batch_size=64, shuffle=True)  # expect: TV024
    val_loader = DataLoader(data, batch_size=128)
    model = build_model(64).to(device)
    optimizer = AdamW(model.parameters(), lr=3e-4, weight_decay=0.01)
    scheduler = CosineAnnealingLR(optimizer, T_max=10)
    loss_fn = nn.MSELoss()
    best = math.inf
    for epoch in range(10):
        train_loss = train_one_epoch(model, loader, optimizer, loss_fn, device)
        val_loss = evaluate(model, val_loader, loss_fn, device)
        scheduler.step()
        if val_loss < best:
            best = val_loss
            torch.save({"model": model.state_dict(), "epoch": epoch}, "best.pt")
        print(epoch, train_loss, val_loss)


if __name__ == "__main__":
    main()
