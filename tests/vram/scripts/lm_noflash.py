"""The same kind of transformer LM without fused attention or checkpointing, built at the
top level of the script from module constants, trained with plain Adam."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB, D, HEADS, LAYERS, SEQ = 4096, 192, 6, 3, 192
BATCH = 12


class SelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.q = nn.Linear(D, D)
        self.k = nn.Linear(D, D)
        self.v = nn.Linear(D, D)
        self.o = nn.Linear(D, D)
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        B, T, _ = x.shape
        q = self.q(x).view(B, T, HEADS, D // HEADS).transpose(1, 2)
        k = self.k(x).view(B, T, HEADS, D // HEADS).transpose(1, 2)
        v = self.v(x).view(B, T, HEADS, D // HEADS).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(D // HEADS)
        weights = self.drop(scores.softmax(dim=-1))
        out = (weights @ v).transpose(1, 2).reshape(B, T, D)
        return self.o(out)


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1 = nn.LayerNorm(D)
        self.attn = SelfAttention()
        self.norm2 = nn.LayerNorm(D)
        self.fc1 = nn.Linear(D, 4 * D)
        self.fc2 = nn.Linear(4 * D, D)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


embed = nn.Embedding(VOCAB, D)
body = nn.Sequential(*[Layer() for _ in range(LAYERS)])
head = nn.Linear(D, VOCAB)
model = nn.Sequential(embed, body, nn.LayerNorm(D), head)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)

for step in range(20):
    tokens = torch.randint(0, VOCAB, (BATCH, SEQ + 1))
    inputs, targets = tokens[:, :-1], tokens[:, 1:]
    logits = model(inputs)
    loss = F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
