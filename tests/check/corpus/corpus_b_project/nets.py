"""Model definitions for the segmentation project."""
import torch.nn.functional as F
from torch import nn


class ConvBlock(nn.Module):
    def __init__(self, cin, cout, p=0.1):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, padding=1)
        self.bn = nn.BatchNorm2d(cout)
        self.p = p

    def forward(self, x):
        return F.dropout2d(F.relu(self.bn(self.conv(x))), self.p)  # expect: TV037


class SegNet(nn.Module):
    def __init__(self, classes=21):
        super().__init__()
        self.down = nn.Sequential(ConvBlock(3, 32), nn.MaxPool2d(2), ConvBlock(32, 64))
        self.up = nn.Upsample(scale_factor=2)
        self.head = nn.Conv2d(64, classes, 1)

    def forward(self, x):
        return self.head(self.up(self.down(x)))
