"""A hand-written Trainer class keeping everything on self."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class MLP(nn.Module):
    def __init__(self, dims):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(dims, dims[1:]))

    def forward(self, x):
        for layer in self.layers[:-1]:
            x = torch.relu(layer(x))
        return self.layers[-1](x)


class Trainer:
    def __init__(self, model: nn.Module, lr: float = 1e-3):
        self.model = model
        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        self.criterion = nn.CrossEntropyLoss()
        self.losses = []
        self.epoch_loss = 0.0

    def train_epoch(self, loader):
        self.model.train()
        for x, y in loader:
            logits = self.model(x)
            loss = self.criterion(logits, y)
            loss.backward()  # expect: TV002
            self.optimizer.step()
            self.epoch_loss += loss  # expect: TV001
            self.losses.append(loss.item())

    def evaluate(self, loader):
        self.model.eval()
        correct = 0
        for x, y in loader:
            correct += (self.model(x).argmax(-1) == y).sum().item()  # expect: TV008
        return correct


if __name__ == "__main__":
    data = TensorDataset(torch.randn(128, 16), torch.randint(0, 4, (128,)))
    trainer = Trainer(MLP([16, 32, 4]))
    for epoch in range(3):
        trainer.train_epoch(DataLoader(data, batch_size=16, shuffle=True))  # expect: TV024
        print(trainer.evaluate(DataLoader(data, batch_size=64)))
