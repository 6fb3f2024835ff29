"""Multi-label tagging: the model applies sigmoid, and the loss applies it again."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Tagger(nn.Module):
    def __init__(self, vocab=1000, tags=20):
        super().__init__()
        self.embed = nn.EmbeddingBag(vocab, 64)
        self.out = nn.Linear(64, tags)
        self.act = nn.Sigmoid()

    def forward(self, tokens, offsets):
        return self.act(self.out(self.embed(tokens, offsets)))


model = Tagger()
criterion = nn.BCEWithLogitsLoss(pos_weight=torch.ones(20))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
batches = [(torch.randint(0, 1000, (50,)), torch.arange(0, 50, 10),
            torch.randint(0, 2, (5, 20)).float())] * 3
for tokens, offsets, labels in batches:
    optimizer.zero_grad()
    probs = model(tokens, offsets)
    loss = criterion(probs, labels)  # expect: TV006
    loss.backward()
    optimizer.step()
    threshold_preds = (probs > 0.5).float()
    f1_proxy = F.binary_cross_entropy(probs.detach(), labels).item()
