"""A trainer whose step and zero_grad live in separate small methods."""
import torch
from torch import nn


class Trainer:
    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer, loss_fn, device="cpu"):
        self.model = model.to(device)
        self.optimizer = optimizer
        self.loss_fn = loss_fn
        self.device = device
        self.history = []
        self.total = 0.0

    def _forward(self, batch):
        x, y = (t.to(self.device) for t in batch)
        return self.loss_fn(self.model(x), y)

    def _optimizer_step(self):
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)

    def fit(self, loader, epochs=1):
        for epoch in range(epochs):
            self.model.train()
            for batch in loader:
                loss = self._forward(batch)
                loss.backward()
                self._optimizer_step()
                self.total += loss.item()
                self.history.append(loss.detach().cpu())
            self.evaluate(loader)

    @torch.inference_mode()
    def evaluate(self, loader):
        self.model.eval()
        return sum(self._forward(batch).item() for batch in loader)


if __name__ == "__main__":
    model = nn.Linear(5, 1)
    trainer = Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1), nn.MSELoss())
    trainer.fit([(torch.randn(4, 5), torch.randn(4, 1))] * 3)
