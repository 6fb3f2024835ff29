"""Less common spellings of the same bugs, and of correct code."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(12, 24), nn.ReLU(), nn.Linear(24, 5),
                                    nn.LogSoftmax(dim=-1))

    def forward(self, x):
        return self.layers(x)


def get_loader():
    return DataLoader(TensorDataset(torch.randn(40, 12), torch.randint(0, 5, (40,))),  # expect: TV024
                      batch_size=8, shuffle=True)


def run(epochs=2):
    net = Encoder()
    opt = torch.optim.RMSprop(net.parameters(), lr=1e-3)
    ce = nn.CrossEntropyLoss()
    nll = nn.NLLLoss()
    logs = {}
    step = 0
    while True:
        for features, target in get_loader():
            log_probs = net(features)
            loss = ce(log_probs, target)  # expect: TV005
            loss = loss + nll(log_probs, target)
            opt.zero_grad()
            loss.backward()
            opt.step()
            logs.setdefault("loss", []).append(loss)  # expect: TV001
            step += 1
        if step > 10 * epochs:
            break
    net.eval()
    with torch.no_grad():
        scores = [net(f).exp() for f, _ in get_loader()]
    return logs, scores


def finetune(net, loader, lr=1e-4):
    optimizer = torch.optim.SGD(net.parameters(), lr=lr)
    for epoch in range(3):
        for features, target in loader:
            out = net(features)
            F.nll_loss(out, target).backward()  # expect: TV002
            optimizer.step()
            optimizer.zero_grad  # expect: TV010


if __name__ == "__main__":
    run()
    finetune(Encoder(), get_loader())
