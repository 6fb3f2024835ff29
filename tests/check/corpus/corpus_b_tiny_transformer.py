"""A character-level transformer trained with hand-written layers: several subtle bugs."""
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
EPOCHS = 20
BLOCK = 128


class Attention(nn.Module):
    def __init__(self, dim, heads, p):
        super().__init__()
        self.heads, self.p = heads, p
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).unbind(2)
        att = (q.transpose(1, 2) @ k.transpose(1, 2).transpose(-1, -2)) / (d // self.heads) ** 0.5
        att = F.dropout(att.softmax(-1), self.p)  # expect: TV037
        y = (att @ v.transpose(1, 2)).transpose(1, 2).reshape(b, t, d)
        return F.dropout(self.proj(y), p=self.p, training=self.training)


class TinyGPT(nn.Module):
    def __init__(self, vocab=96, dim=256, heads=4, layers=4, p=0.1):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.zeros(1, BLOCK, dim))
        self.blocks = nn.ModuleList(Attention(dim, heads, p) for _ in range(layers))
        self.head = nn.Linear(dim, vocab)

    def forward(self, idx):
        x = self.tok(idx) + self.pos[:, : idx.size(1)]
        for block in self.blocks:
            x = x + block(x)
        return self.head(x)


def batches(data, batch_size):
    for i in range(0, len(data) - BLOCK - 1, batch_size * BLOCK):
        chunk = data[i: i + batch_size * BLOCK + 1]
        if len(chunk) == batch_size * BLOCK + 1:
            yield chunk[:-1].view(batch_size, BLOCK), chunk[1:].view(batch_size, BLOCK)


def train(data):
    model = TinyGPT().cuda()
    for epoch in range(EPOCHS):
        optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)  # expect: TV033
        for x, y in batches(data, 32):
            x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
            optimizer.zero_grad(set_to_none=True)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # expect: TV038
            with torch.autocast("cuda", dtype=torch.float16):  # expect: TV039
                logits = model(x)
                loss = F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} loss {loss.item():.3f}")
    return model


if __name__ == "__main__":
    text = open("input.txt", encoding="utf-8").read()
    train(torch.tensor([min(ord(c), 95) for c in text], dtype=torch.long))
