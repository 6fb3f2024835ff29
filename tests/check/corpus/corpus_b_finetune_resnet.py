"""Transfer learning on a folder of images: a torchvision ResNet with a new head."""
import argparse

import torch
import torchvision
from torch import nn
from torch.utils.data import DataLoader
from torchvision import datasets, transforms


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default="data/flowers")
    parser.add_argument("--epochs", type=int, default=25)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--resume", default="")
    return parser.parse_args()


def build_loaders(root):
    tf = transforms.Compose([transforms.Resize(224), transforms.ToTensor()])
    train_set = datasets.ImageFolder(f"{root}/train", tf)
    val_set = datasets.ImageFolder(f"{root}/val", tf)
    train_loader = DataLoader(train_set, batch_size=64, shuffle=True, num_workers=8,
                              pin_memory=True)
    val_loader = DataLoader(val_set, batch_size=128, num_workers=8, pin_memory=True)
    return train_loader, val_loader, len(train_set.classes)


@torch.no_grad()
def evaluate(model, loader, device):
    model.eval()
    correct = total = 0
    for images, labels in loader:
        images, labels = images.to(device), labels.to(device)
        correct += (model(images).argmax(1) == labels).sum().item()
        total += labels.numel()
    return correct / total


def main():
    args = parse_args()
    torch.manual_seed(0)
    device = torch.device("cuda")
    train_loader, val_loader, num_classes = build_loaders(args.data)

    model = torchvision.models.resnet50(weights="IMAGENET1K_V2")
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    model.fc = nn.Linear(model.fc.in_features, num_classes)  # expect: TV032
    model = model.to(device)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=7, gamma=0.1)
    if args.resume:
        model.load_state_dict(torch.load(args.resume))  # expect: TV035
    criterion = nn.CrossEntropyLoss()

    for epoch in range(args.epochs):
        model.train()
        for images, labels in train_loader:
            images = images.to(device, non_blocking=True)
            labels = labels.to(device, non_blocking=True)
            optimizer.zero_grad(set_to_none=True)
            loss = criterion(model(images), labels)
            loss.backward()
            optimizer.step()
            scheduler.step()  # expect: TV031
        acc = evaluate(model, val_loader, device)
        print(f"epoch {epoch}: val acc {acc:.3f}")
        torch.save(model.state_dict(), f"resnet_ep{epoch}.pt")


if __name__ == "__main__":
    main()
