"""A transformer LM with hand-written attention (softmax over a masked score matrix),
sizes from argparse, Adam, and gradient checkpointing of each block."""
import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint


class Attention(nn.Module):
    def __init__(self, d_model, n_heads, max_len):
        super().__init__()
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.n_heads = n_heads
        self.register_buffer("mask", torch.tril(torch.ones(max_len, max_len)).view(1, 1, max_len, max_len))

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q = q.view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2)
        k = k.view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2)
        v = v.view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.proj(y)


class Block(nn.Module):
    def __init__(self, d_model, n_heads, max_len):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = Attention(d_model, n_heads, max_len)
        self.ln2 = nn.LayerNorm(d_model)
        self.ff = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(),
                                nn.Linear(4 * d_model, d_model))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.ff(self.ln2(x))


class LM(nn.Module):
    def __init__(self, vocab, d_model, n_heads, n_layers, max_len, use_checkpoint):
        super().__init__()
        self.tok = nn.Embedding(vocab, d_model)
        self.pos = nn.Parameter(torch.zeros(1, max_len, d_model))
        self.blocks = nn.ModuleList([Block(d_model, n_heads, max_len) for _ in range(n_layers)])
        self.ln = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab, bias=False)
        self.use_checkpoint = use_checkpoint

    def forward(self, idx):
        x = self.tok(idx) + self.pos[:, : idx.size(1)]
        for block in self.blocks:
            if self.use_checkpoint:
                x = checkpoint(block, x, use_reentrant=False)
            else:
                x = block(x)
        return self.head(self.ln(x))


parser = argparse.ArgumentParser()
parser.add_argument("--vocab", type=int, default=8192)
parser.add_argument("--d-model", type=int, default=256)
parser.add_argument("--heads", type=int, default=8)
parser.add_argument("--layers", type=int, default=4)
parser.add_argument("--seq-len", type=int, default=256)
parser.add_argument("--batch-size", type=int, default=8)
parser.add_argument("--checkpoint", action="store_true", default=True)
args = parser.parse_args()

model = LM(args.vocab, args.d_model, args.heads, args.layers, args.seq_len, args.checkpoint)
optimizer = torch.optim.Adam(model.parameters(), lr=3e-4)
for step in range(100):
    idx = torch.randint(0, args.vocab, (args.batch_size, args.seq_len))
    logits = model(idx)
    loss = F.cross_entropy(logits.view(-1, args.vocab), idx.view(-1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
