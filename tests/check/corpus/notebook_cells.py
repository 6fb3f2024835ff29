# %% imports
import numpy as np
import torch
import torch.nn as nn

# %% data
X = torch.tensor(np.random.rand(200, 3), dtype=torch.float32)  # expect: TV024
Y = (X.sum(1, keepdim=True) > 1.5).float()

# %% model
net = nn.Sequential(nn.Linear(3, 16), nn.ReLU(), nn.Linear(16, 1))
opt = torch.optim.Adam(net.parameters(), lr=1e-2)
bce = nn.BCEWithLogitsLoss()

# %% train
for it in range(200):
    opt.zero_grad  # expect: TV010
    out = net(X)
    loss = bce(out, Y)
    loss.backward()  # expect: TV002
    opt.step()
    if it % 50 == 0:
        print(it, loss.item())

# %% evaluate
net.eval  # expect: TV010
with torch.no_grad():
    acc = ((net(X) > 0).float() == Y).float().mean()
print(f"accuracy: {acc:.2%}")
