"""CIFAR-style image classifier, plain script: several slow or silently wrong habits."""
import argparse
import os

import torch
import torch.nn as nn
import torch.nn.functional as F
from PIL import Image
from torch.utils.data import DataLoader, Dataset
from torchvision import transforms


class ImageList(Dataset):
    def __init__(self, root, transform):
        self.files = sorted(os.listdir(root))
        self.root = root
        self.transform = transform

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        name = self.files[i]
        image = Image.open(os.path.join(self.root, name)).convert("RGB")
        return self.transform(image), int(name.split("_")[0])


class SmallResNet(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1))
        self.drop = nn.Dropout(0.3)
        self.head = nn.Linear(64, classes)

    def forward(self, x):
        return self.head(self.drop(torch.flatten(self.features(x), 1)))


@torch.no_grad()
def evaluate(net, loader, device):
    net.eval()  # expect: TV022
    correct = total = 0
    for images, labels in loader:
        images, labels = images.to(device), labels.to(device)
        correct += (net(images).argmax(1) == labels).sum().item()
        total += labels.numel()
    return correct / total


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default="data/cifar")
    parser.add_argument("--epochs", type=int, default=30)
    args = parser.parse_args()
    torch.manual_seed(0)
    device = torch.device("cuda")
    tf = transforms.Compose([transforms.ToTensor(), transforms.Normalize([0.5] * 3, [0.25] * 3)])
    train_loader = DataLoader(ImageList(f"{args.data}/train", tf), batch_size=128,  # expect: TV027
                              shuffle=True)
    val_loader = DataLoader(ImageList(f"{args.data}/val", tf), batch_size=256)
    model = SmallResNet().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
    class_weights = torch.tensor([1.0, 1.0, 1.0, 2.0, 1.0, 2.0, 1.0, 1.0, 1.0, 1.0])
    grad_norms = []
    model.train()
    for epoch in range(args.epochs):
        for step, (images, labels) in enumerate(train_loader):
            images, labels = images.to(device), labels.to(device)
            optimizer.zero_grad(set_to_none=True)
            logits = model(images)
            loss = F.cross_entropy(logits, labels, weight=class_weights.to(device))  # expect: TV025
            loss.backward()
            grad_norms.append(sum(p.grad.norm().item() for p in model.parameters()))  # expect: TV023
            optimizer.step()
            if step % 100 == 0:
                print(f"epoch {epoch} step {step} loss {loss.item():.3f}")
        print(f"epoch {epoch} val acc {evaluate(model, val_loader, device):.3f}")
    torch.save(model.state_dict(), "cifar.pt")


if __name__ == "__main__":
    main()
