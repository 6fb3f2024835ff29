"""Functions style with bugs hidden behind calls."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

epoch_history = []


def compute_loss(model, batch, loss_fn):
    x, y = batch
    return loss_fn(model(x), y)


def train_step(model, batch, optimizer, loss_fn):
    loss = compute_loss(model, batch, loss_fn)
    loss.backward()  # expect: TV002
    optimizer.step()
    epoch_history.append(loss)  # expect: TV001
    return loss.item()


def validate(model, loader, loss_fn):
    model.eval()
    total = 0.0
    for batch in loader:
        x, y = batch
        total += loss_fn(model(x), y).item()  # expect: TV008
    model.train()
    return total / len(loader)


def fit(epochs=3):
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    loss_fn = nn.MSELoss()
    loader = DataLoader(TensorDataset(torch.randn(64, 8), torch.randn(64, 1)), batch_size=8)  # expect: TV026
    for epoch in range(epochs):
        for batch in loader:
            train_step(model, batch, optimizer, loss_fn)
        print(validate(model, loader, loss_fn))


fit()
