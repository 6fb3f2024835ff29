"""A small U-Net for segmentation: skip connections with torch.cat, ConvTranspose2d,
plain SGD and gradient accumulation over 4 micro-batches."""
import torch
import torch.nn as nn
import torch.nn.functional as F

config = {"micro_batch": 16, "image_size": 128, "base": 16, "accum_steps": 4, "classes": 3}


def double_conv(cin, cout):
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
        nn.Conv2d(cout, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
    )


class UNet(nn.Module):
    def __init__(self, base, classes):
        super().__init__()
        self.down1 = double_conv(3, base)
        self.down2 = double_conv(base, base * 2)
        self.down3 = double_conv(base * 2, base * 4)
        self.up2 = nn.ConvTranspose2d(base * 4, base * 2, 2, stride=2)
        self.dec2 = double_conv(base * 4, base * 2)
        self.up1 = nn.ConvTranspose2d(base * 2, base, 2, stride=2)
        self.dec1 = double_conv(base * 2, base)
        self.out = nn.Conv2d(base, classes, 1)

    def forward(self, x):
        d1 = self.down1(x)
        d2 = self.down2(F.max_pool2d(d1, 2))
        d3 = self.down3(F.max_pool2d(d2, 2))
        u2 = self.dec2(torch.cat([self.up2(d3), d2], dim=1))
        u1 = self.dec1(torch.cat([self.up1(u2), d1], dim=1))
        return self.out(u1)


model = UNet(config["base"], config["classes"])
opt = torch.optim.SGD(model.parameters(), lr=0.05)
size = config["image_size"]
for i in range(16):
    x = torch.randn(config["micro_batch"], 3, size, size)
    target = torch.randint(0, config["classes"], (config["micro_batch"], size, size))
    loss = F.cross_entropy(model(x), target) / config["accum_steps"]
    loss.backward()
    if (i + 1) % config["accum_steps"] == 0:
        opt.step()
        opt.zero_grad()
