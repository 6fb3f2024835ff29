"""A small ViT: patch conv, cls token and position parameters, nn.MultiheadAttention with
weights returned, dropout, AdamW, label smoothing."""
import torch, torch.nn as nn, torch.nn.functional as F
class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.n1 = nn.LayerNorm(dim); self.n2 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, dropout=0.1, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(dim, dim * 4), nn.GELU(), nn.Dropout(0.1), nn.Linear(dim * 4, dim))
    def forward(self, x):
        h = self.n1(x)
        a, _ = self.attn(h, h, h)
        x = x + a
        return x + self.mlp(self.n2(x))
class ViT(nn.Module):
    def __init__(self, img=64, patch=8, dim=192, depth=4, heads=3, classes=100):
        super().__init__()
        self.patch = nn.Conv2d(3, dim, patch, patch)
        self.cls = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos = nn.Parameter(torch.zeros(1, (img // patch) ** 2 + 1, dim))
        self.blocks = nn.Sequential(*[Block(dim, heads) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)
    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        x = self.blocks(x)
        return self.head(self.norm(x)[:, 0])
model = ViT()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)
bs = 64
for i in range(5):
    imgs = torch.randn(bs, 3, 64, 64); labels = torch.randint(0, 100, (bs,))
    loss = F.cross_entropy(model(imgs), labels, label_smoothing=0.1)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
