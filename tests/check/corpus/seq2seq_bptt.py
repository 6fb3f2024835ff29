"""Character RNN: the loss is summed over time steps and backpropagated once per sequence."""
import torch
import torch.nn as nn


class CharRNN(nn.Module):
    def __init__(self, vocab, hidden=128):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.cell = nn.LSTMCell(hidden, hidden)
        self.out = nn.Linear(hidden, vocab)

    def forward(self, token, state):
        h, c = self.cell(self.embed(token), state)
        return self.out(h), (h, c)


def train(text_ids, vocab, epochs=3, chunk=32):
    model = CharRNN(vocab)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    losses = []
    for epoch in range(epochs):
        for start in range(0, text_ids.size(0) - chunk - 1, chunk):
            state = (torch.zeros(1, 128), torch.zeros(1, 128))
            optimizer.zero_grad()
            loss = 0
            for t in range(chunk):
                logits, state = model(text_ids[start + t].view(1), state)
                loss += criterion(logits, text_ids[start + t + 1].view(1))
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            optimizer.step()
            losses.append(loss.item() / chunk)
    return losses


if __name__ == "__main__":
    print(train(torch.randint(0, 50, (500,)), 50)[-1])
