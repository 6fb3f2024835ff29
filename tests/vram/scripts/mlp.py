"""An MLP on flattened vectors, batch size from a variable, SGD with momentum."""
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 256
IN_DIM = 2048
HIDDEN = 4096

model = nn.Sequential(
    nn.Linear(IN_DIM, HIDDEN),
    nn.ReLU(),
    nn.Linear(HIDDEN, HIDDEN),
    nn.ReLU(),
    nn.Linear(HIDDEN, 10),
)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

for step in range(100):
    x = torch.randn(BATCH, IN_DIM)
    y = torch.randint(0, 10, (BATCH,))
    logits = model(x)
    loss = F.cross_entropy(logits, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
