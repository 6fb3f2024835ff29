"""Real bugs the engine does not find yet (`# known-miss:`), kept so the score stays honest."""
import torch
from torch import nn


class Tracker:
    def __init__(self):
        self.losses = []


def train(model, loader, optimizer, accum=4):
    tracker = Tracker()
    criterion = nn.CrossEntropyLoss()
    for i, (x, y) in enumerate(loader):
        loss = criterion(model(x), y)
        loss.backward()  # expect: TV004
        tracker.losses.append(loss)  # expect: TV001
        if (i + 1) % accum == 0:
            step_and_reset(optimizer)
    return tracker


def step_and_reset(optimizer):
    optimizer.step()
    optimizer.zero_grad()


def validate(model, loader):
    model.eval()
    return run_batches(model, loader)  # expect: TV008


def run_batches(model, loader):
    return [model(x).argmax(1) for x, _ in loader]


def fit_lbfgs(model, x, y):
    optimizer = torch.optim.LBFGS(model.parameters())

    def closure():
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.zero_grad()  # known-miss: TV003
        return loss

    for _ in range(5):
        optimizer.step(closure)
