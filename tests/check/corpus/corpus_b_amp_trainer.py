"""A small Trainer class with mixed precision, gradient clipping and a cosine schedule."""
import math

import torch
import torch.nn.functional as F
from torch import nn


class TextClassifier(nn.Module):
    def __init__(self, vocab=30000, dim=256, classes=4, p_drop=0.1):
        super().__init__()
        self.embed = nn.EmbeddingBag(vocab, dim)
        self.fc1 = nn.Linear(dim, dim)
        self.fc2 = nn.Linear(dim, classes)
        self.p_drop = p_drop

    def forward(self, tokens, offsets):
        h = F.gelu(self.fc1(self.embed(tokens, offsets)))
        h = F.dropout(h, self.p_drop, training=self.training)
        return self.fc2(h)


class Trainer:
    def __init__(self, model, train_loader, val_loader, epochs=10, lr=3e-4, clip=1.0):
        self.model = model.cuda()
        self.train_loader = train_loader
        self.val_loader = val_loader
        self.epochs = epochs
        self.clip = clip
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=lr, weight_decay=0.01)
        total = epochs * len(train_loader)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda s: 0.5 * (1 + math.cos(math.pi * s / total)))
        self.scaler = torch.cuda.amp.GradScaler()

    def train_step(self, tokens, offsets, labels):
        self.optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.float16):
            loss = F.cross_entropy(self.model(tokens, offsets), labels)
        self.scaler.scale(loss).backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.clip)  # expect: TV036
        self.scheduler.step()  # expect: TV030
        self.scaler.step(self.optimizer)
        self.scaler.update()
        return loss.detach()

    @torch.no_grad()
    def validate(self):
        self.model.eval()
        losses = []
        for tokens, offsets, labels in self.val_loader:
            tokens, offsets, labels = tokens.cuda(), offsets.cuda(), labels.cuda()
            with torch.autocast("cuda", dtype=torch.float16):
                losses.append(F.cross_entropy(self.model(tokens, offsets), labels))
        self.model.train()
        return torch.stack(losses).mean().item()

    def fit(self):
        for epoch in range(self.epochs):
            self.model.train()
            running = torch.zeros((), device="cuda")
            for tokens, offsets, labels in self.train_loader:
                tokens, offsets, labels = tokens.cuda(), offsets.cuda(), labels.cuda()
                running += self.train_step(tokens, offsets, labels)
            print(f"epoch {epoch} train {running.item() / len(self.train_loader):.4f} "
                  f"val {self.validate():.4f}")
