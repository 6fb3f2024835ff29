"""Lightning-style module: the framework owns the loop, samplers, seeding and devices."""
import lightning as L
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class LitClassifier(L.LightningModule):
    def __init__(self, lr=1e-3):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, 3))
        self.lr = lr

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.cross_entropy(self.net(x), y)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_acc", (self.net(x).argmax(1) == y).float().mean())

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.lr)


if __name__ == "__main__":
    L.seed_everything(0)
    data = TensorDataset(torch.randn(512, 20), torch.randint(0, 3, (512,)))
    trainer = L.Trainer(max_epochs=3, accelerator="cuda", devices=2, strategy="ddp")
    trainer.fit(LitClassifier(), DataLoader(data, batch_size=32, shuffle=True, num_workers=2),
                DataLoader(data, batch_size=64))
