"""A LightningModule: the framework owns the loop, zero_grad and no_grad for validation."""
import pytorch_lightning as pl
import torch
import torch.nn.functional as F
from torch import nn


class LitClassifier(pl.LightningModule):
    def __init__(self, lr=1e-3):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(28 * 28, 64), nn.ReLU(), nn.Linear(64, 10))
        self.lr = lr
        self.train_losses = []
        self.step_outputs = []
        self.loss_sum = 0.0

    def forward(self, x):
        return self.encoder(x.view(x.size(0), -1))

    def training_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        loss = F.cross_entropy(logits, y)
        self.train_losses.append(loss)  # expect: TV001
        self.loss_sum += loss  # expect: TV001
        self.step_outputs.append(loss.detach())
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        self.log("val_loss", F.cross_entropy(logits, y))

    def on_train_epoch_end(self):
        mean = torch.stack(self.step_outputs).mean()
        self.log("epoch_loss", mean)
        self.step_outputs.clear()

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.lr)


class LitClean(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(10, 1)
        self.history = []

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.mse_loss(self.net(x), y)
        self.history.append(loss.item())
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


if __name__ == "__main__":
    trainer = pl.Trainer(max_epochs=1)
    trainer.fit(LitClassifier())
