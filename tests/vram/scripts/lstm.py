"""An LSTM language model with forward(x, hidden), hyper-parameters in a dict, SGD with
momentum; the hidden state is carried (detached) between batches."""
import torch
import torch.nn as nn

hp = dict(vocab=5000, emb=256, hidden=512, layers=2, bptt=64, batch_size=32, lr=0.1)


class RNNModel(nn.Module):
    def __init__(self, vocab, emb, hidden, layers):
        super().__init__()
        self.encoder = nn.Embedding(vocab, emb)
        self.rnn = nn.LSTM(emb, hidden, layers, batch_first=True)
        self.decoder = nn.Linear(hidden, vocab)
        self.layers, self.hidden = layers, hidden

    def init_hidden(self, bsz):
        return (torch.zeros(self.layers, bsz, self.hidden), torch.zeros(self.layers, bsz, self.hidden))

    def forward(self, x, hidden):
        emb = self.encoder(x)
        output, hidden = self.rnn(emb, hidden)
        return self.decoder(output), hidden


model = RNNModel(hp["vocab"], hp["emb"], hp["hidden"], hp["layers"])
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=hp["lr"], momentum=0.9)
hidden = model.init_hidden(hp["batch_size"])
for batch in range(50):
    data = torch.randint(0, hp["vocab"], (hp["batch_size"], hp["bptt"]))
    targets = torch.randint(0, hp["vocab"], (hp["batch_size"], hp["bptt"]))
    hidden = tuple(h.detach() for h in hidden)
    optimizer.zero_grad()
    output, hidden = model(data, hidden)
    loss = criterion(output.view(-1, hp["vocab"]), targets.view(-1))
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
    optimizer.step()
