"""Mixed precision training with GradScaler; zero_grad slipped between backward and step."""
import torch
from torch import nn
from torch.cuda.amp import GradScaler, autocast

model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 8))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
scaler = GradScaler()
loss_fn = nn.CrossEntropyLoss()
data = [(torch.randn(16, 32), torch.randint(0, 8, (16,))) for _ in range(10)]

for epoch in range(2):
    for x, y in data:
        with autocast():
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        optimizer.zero_grad(set_to_none=True)  # expect: TV003
        scaler.unscale_(optimizer)
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()

for x, y in data:
    optimizer.zero_grad(set_to_none=True)
    with autocast():
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
