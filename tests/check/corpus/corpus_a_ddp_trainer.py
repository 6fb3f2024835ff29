"""torchrun-launched trainer class; the loader is built in __init__ and forgot the sampler."""
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, Dataset


class RandomImages(Dataset):
    def __init__(self, n=1024):
        self.x = torch.randn(n, 3, 32, 32)
        self.y = torch.randint(0, 10, (n,))

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class Trainer:
    def __init__(self, model: nn.Module, epochs: int = 5):
        self.rank = int(os.environ["LOCAL_RANK"])
        self.model = DistributedDataParallel(model.to(self.rank), device_ids=[self.rank])
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1, momentum=0.9)
        self.criterion = nn.CrossEntropyLoss()
        self.train_loader = DataLoader(RandomImages(), batch_size=128, shuffle=True,  # expect: TV020
                                       num_workers=8, pin_memory=True)
        self.epochs = epochs

    def run_epoch(self, epoch):
        self.model.train()
        for images, labels in self.train_loader:
            images = images.to(self.rank, non_blocking=True)
            labels = labels.to(self.rank, non_blocking=True)
            self.optimizer.zero_grad(set_to_none=True)
            loss = self.criterion(self.model(images), labels)
            loss.backward()
            self.optimizer.step()

    def fit(self):
        for epoch in range(self.epochs):
            self.run_epoch(epoch)
            if self.rank == 0:
                torch.save(self.model.module.state_dict(), f"ckpt_{epoch}.pt")


def main():
    dist.init_process_group("nccl")
    torch.manual_seed(1234)
    net = nn.Sequential(nn.Conv2d(3, 16, 3), nn.ReLU(), nn.Flatten(), nn.LazyLinear(10))
    Trainer(net).fit()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
