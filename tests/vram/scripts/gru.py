"""A text classifier: Embedding, 2-layer bidirectional GRU with dropout, mean pooling,
RMSprop, nn.CrossEntropyLoss."""
import torch, torch.nn as nn
class Classifier(nn.Module):
    def __init__(self, vocab=20000, emb=128, hidden=256, classes=4):
        super().__init__()
        self.emb = nn.Embedding(vocab, emb, padding_idx=0)
        self.gru = nn.GRU(emb, hidden, num_layers=2, batch_first=True, bidirectional=True, dropout=0.2)
        self.fc = nn.Linear(2 * hidden, classes)
    def forward(self, tokens):
        out, h = self.gru(self.emb(tokens))
        return self.fc(out.mean(dim=1))
model = Classifier()
opt = torch.optim.RMSprop(model.parameters(), lr=1e-3)
loss_fn = nn.CrossEntropyLoss()
for step in range(5):
    tokens = torch.randint(1, 20000, (64, 200))
    y = torch.randint(0, 4, (64,))
    opt.zero_grad()
    loss = loss_fn(model(tokens), y)
    loss.backward()
    opt.step()
