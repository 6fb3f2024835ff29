"""A script that imports torch with `from ... import *`: the rules see the same classes."""
import torch
from torch.nn import *
from torch.nn.functional import *
from torch.optim import *
from torch.optim.lr_scheduler import *
from torch.utils.data import *

torch.manual_seed(0)
model = Sequential(Linear(10, 32), ReLU(), Linear(32, 3), Softmax(dim=1))
criterion = CrossEntropyLoss()
optimizer = SGD(model.parameters(), lr=0.1)
scheduler = StepLR(optimizer, step_size=30)
data = TensorDataset(torch.randn(100, 10), torch.randint(0, 3, (100,)))
loader = DataLoader(data, batch_size=10)  # expect: TV026
losses = []
for epoch in range(100):
    for x, y in loader:
        out = model(x)
        loss = criterion(out, y)  # expect: TV005
        loss.backward()  # expect: TV002
        optimizer.step()
        scheduler.step()  # expect: TV031
        losses.append(loss)  # expect: TV001

# the same classes used correctly
head = Linear(10, 3)
head_opt = AdamW(head.parameters(), lr=1e-3)
per_batch = OneCycleLR(head_opt, max_lr=0.1, total_steps=1000)
shuffled = DataLoader(data, batch_size=10, shuffle=True)
for epoch in range(10):
    for x, y in shuffled:
        head_opt.zero_grad()
        loss = cross_entropy(head(x), y)
        loss.backward()
        head_opt.step()
        per_batch.step()
        losses.append(loss.item())
