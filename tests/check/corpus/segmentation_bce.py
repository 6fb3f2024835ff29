"""A small U-Net-like segmenter trained with BCELoss on raw logits."""
import torch
import torch.nn as nn


class Segmenter(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(),
                                     nn.Conv2d(16, 16, 3, padding=1), nn.ReLU())
        self.decoder = nn.Conv2d(16, 1, 1)

    def forward(self, x):
        return self.decoder(self.encoder(x))


class SigmoidSegmenter(Segmenter):
    def forward(self, x):
        return torch.sigmoid(self.decoder(self.encoder(x)))


def train(loader, epochs=2):
    model = Segmenter()
    prob_model = SigmoidSegmenter()
    criterion = nn.BCELoss()
    optimizer = torch.optim.Adam(list(model.parameters()) + list(prob_model.parameters()))
    for epoch in range(epochs):
        for images, masks in loader:
            optimizer.zero_grad()
            logits = model(images)
            loss = criterion(logits, masks)  # expect: TV007
            loss = loss + criterion(prob_model(images), masks)
            loss.backward()
            optimizer.step()
