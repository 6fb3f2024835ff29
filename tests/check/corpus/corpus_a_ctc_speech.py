"""CTC speech recogniser with per-utterance decoding inside the training step."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

VOCAB = "_ abcdefghijklmnopqrstuvwxyz'"


class Utterances(Dataset):
    def __init__(self, n=512):
        self.feats = [torch.randn(int(torch.randint(50, 120, ())), 80) for _ in range(n)]
        self.texts = [torch.randint(1, len(VOCAB), (20,)) for _ in range(n)]

    def __len__(self):
        return len(self.feats)

    def __getitem__(self, i):
        return self.feats[i], self.texts[i]


def collate(batch):
    feats, texts = zip(*batch)
    lengths = torch.tensor([f.shape[0] for f in feats])
    return nn.utils.rnn.pad_sequence(feats, batch_first=True), lengths, torch.stack(texts)


class Acoustic(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(80, 256, num_layers=3, batch_first=True, bidirectional=True)
        self.out = nn.Linear(512, len(VOCAB))

    def forward(self, x):
        return self.out(self.rnn(x)[0]).log_softmax(-1)


def greedy(ids):
    return "".join(VOCAB[i] for i in ids if i != 0)


def main():
    torch.manual_seed(3)
    device = "cuda"
    model = Acoustic().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-4)
    loader = DataLoader(Utterances(), batch_size=16, shuffle=True, collate_fn=collate,
                        num_workers=6, pin_memory=True)
    blank_weight = torch.tensor(0.5)
    for epoch in range(10):
        model.train()
        for feats, lengths, texts in loader:
            feats, texts = feats.to(device), texts.to(device)
            log_probs = model(feats)
            loss = F.ctc_loss(log_probs.transpose(0, 1), texts, lengths,
                              torch.full((texts.size(0),), 20, dtype=torch.long))
            loss = loss + blank_weight.to(device) * log_probs[..., 0].exp().mean()  # expect: TV025
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            optimizer.step()
            hyps = [greedy(row.argmax(-1).tolist()) for row in log_probs]  # expect: TV023
            print(epoch, loss.item(), hyps[0])


if __name__ == "__main__":
    main()
