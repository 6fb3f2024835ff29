"""torchrun script in functions: the sampler is right, but set_epoch was forgotten."""
import argparse
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def setup():
    dist.init_process_group(backend="nccl")
    rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(rank)
    return rank


def make_loader(batch_size):
    data = TensorDataset(torch.randn(4096, 32), torch.randint(0, 4, (4096,)))
    sampler = DistributedSampler(data, shuffle=True)  # expect: TV021
    return DataLoader(data, batch_size=batch_size, sampler=sampler, num_workers=4,
                      pin_memory=True)


def train_one_epoch(model, loader, optimizer, rank):
    model.train()
    for x, y in loader:
        x, y = x.cuda(rank, non_blocking=True), y.cuda(rank, non_blocking=True)
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=256)
    args = parser.parse_args()
    rank = setup()
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4)).cuda(rank),
                device_ids=[rank])
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    loader = make_loader(args.batch_size)
    for epoch in range(args.epochs):
        train_one_epoch(model, loader, optimizer, rank)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
