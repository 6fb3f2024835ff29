"""A small image classifier on synthetic shapes: the bundled example that tvis records.

Everything is made in code from a seed (no download): 3x16x16 images of four kinds of
pattern, a torchvision-style transform pipeline, a DataLoader, a small residual CNN,
CrossEntropyLoss and Adam. Runs in a few seconds on a CPU.

    python examples/image_classifier/train.py --max-steps 20
    tvis run --steps 3 examples/image_classifier/train.py --lr 3e-3
"""

from __future__ import annotations

import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


# -- transforms (the shape of torchvision.transforms, without the dependency) ----------

class Compose:
    def __init__(self, transforms: list) -> None:
        self.transforms = transforms

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        for t in self.transforms:
            x = t(x)
        return x


class RandomHorizontalFlip:
    def __init__(self, p: float = 0.5) -> None:
        self.p = p

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return x.flip(-1) if torch.rand(1).item() < self.p else x


class Normalize:
    def __init__(self, mean: list[float], std: list[float]) -> None:
        self.mean = torch.tensor(mean).view(-1, 1, 1)
        self.std = torch.tensor(std).view(-1, 1, 1)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.mean) / self.std


# -- data ------------------------------------------------------------------------------

class ShapesDataset(Dataset):
    """Noisy images of stripes, checks, a ring or a blob; the label is the pattern."""

    classes = ["stripes", "checks", "ring", "blob"]

    def __init__(self, size: int, seed: int, transform=None) -> None:
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(len(self.classes), (size,), generator=g)
        yy, xx = torch.meshgrid(torch.arange(16.0), torch.arange(16.0), indexing="ij")
        r = ((yy - 7.5) ** 2 + (xx - 7.5) ** 2).sqrt()
        patterns = torch.stack([
            (xx % 4 < 2).float(),
            ((xx // 4 + yy // 4) % 2).float(),
            ((r > 4) & (r < 6)).float(),
            (-r / 4).exp(),
        ])
        colour = torch.rand(size, 3, 1, 1, generator=g) * 0.5 + 0.5
        noise = torch.randn(size, 3, 16, 16, generator=g) * 0.3
        self.images = patterns[self.labels].unsqueeze(1) * colour + noise
        self.transform = transform

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        image = self.images[i]
        if self.transform is not None:
            image = self.transform(image)
        return image, int(self.labels[i])


# -- model -----------------------------------------------------------------------------

class Block(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + x)


class SmallCNN(nn.Module):
    def __init__(self, num_classes: int, width: int = 16) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, padding=1), nn.ReLU())
        self.blocks = nn.ModuleList([Block(width), Block(width)])
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.dropout = nn.Dropout(0.1)
        self.head = nn.Linear(width, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        for block in self.blocks:
            x = block(x)
        x = self.pool(x).flatten(1)
        return self.head(self.dropout(x))


# -- training --------------------------------------------------------------------------

def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--max-steps", type=int, default=None, help="stop after this many steps")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--save-state", default=None, help="save model, optimizer and RNG state here")
    return p.parse_args()


def main() -> None:
    args = parse_args()
    torch.manual_seed(args.seed)
    torch.use_deterministic_algorithms(True)
    transform = Compose([RandomHorizontalFlip(), Normalize([0.5] * 3, [0.5] * 3)])
    dataset = ShapesDataset(512, seed=args.seed, transform=transform)
    loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=True)
    model = SmallCNN(len(dataset.classes))
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)

    step = 0
    for epoch in range(args.epochs):
        model.train()
        for images, labels in loader:
            logits = model(images)
            loss = criterion(logits, labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            print(f"step {step} epoch {epoch} loss {loss.item():.6f}", flush=True)
            if args.max_steps is not None and step >= args.max_steps:
                break
        if args.max_steps is not None and step >= args.max_steps:
            break

    if args.save_state:
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                    "rng": torch.get_rng_state()}, args.save_state)


if __name__ == "__main__":
    main()
