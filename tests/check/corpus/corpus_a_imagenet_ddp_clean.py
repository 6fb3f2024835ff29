"""ImageNet-style DDP training done right: every data-pipeline look-alike stays silent."""
import os
import random

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler
from torchvision import datasets, models, transforms


def seed_all(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def build_loaders(root, batch_size, workers):
    train_tf = transforms.Compose([transforms.RandomResizedCrop(224),
                                   transforms.RandomHorizontalFlip(), transforms.ToTensor()])
    val_tf = transforms.Compose([transforms.Resize(256), transforms.CenterCrop(224),
                                 transforms.ToTensor()])
    train_set = datasets.ImageFolder(os.path.join(root, "train"), train_tf)
    val_set = datasets.ImageFolder(os.path.join(root, "val"), val_tf)
    train_sampler = DistributedSampler(train_set, shuffle=True)
    train_loader = DataLoader(train_set, batch_size=batch_size, sampler=train_sampler,
                              num_workers=workers, pin_memory=True, persistent_workers=True)
    val_loader = DataLoader(val_set, batch_size=batch_size, num_workers=workers,
                            pin_memory=True, sampler=DistributedSampler(val_set, shuffle=False))
    return train_loader, val_loader, train_sampler


def train_one_epoch(model, loader, criterion, optimizer, scaler, device, log_every=100):
    model.train()
    running = torch.zeros((), device=device)
    for step, (images, target) in enumerate(loader):
        images = images.to(device, non_blocking=True)
        target = target.to(device, non_blocking=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = criterion(model(images), target)
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        running += loss.detach()
        if step % log_every == 0 and dist.get_rank() == 0:
            print(f"step {step} loss {running.item() / (step + 1):.4f}")


@torch.no_grad()
def validate(model, loader, device):
    model.eval()
    correct = torch.zeros((), device=device)
    for images, target in loader:
        images, target = images.to(device, non_blocking=True), target.to(device)
        correct += (model(images).argmax(1) == target).sum()
    dist.all_reduce(correct)
    return correct.item()


def main():
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    device = torch.device("cuda", local_rank)
    torch.cuda.set_device(device)
    seed_all(42 + dist.get_rank())
    train_loader, val_loader, sampler = build_loaders("/data/imagenet", 256, 8)
    model = DDP(models.resnet50().to(device), device_ids=[local_rank])
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    scaler = torch.amp.GradScaler("cuda")
    for epoch in range(90):
        sampler.set_epoch(epoch)
        train_one_epoch(model, train_loader, criterion, optimizer, scaler, device)
        print(validate(model, val_loader, device))
        torch.cuda.empty_cache()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
