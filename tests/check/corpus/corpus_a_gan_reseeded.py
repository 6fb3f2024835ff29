"""A small GAN whose author re-seeds every epoch 'for reproducibility'."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

SEED = 7
latent = 16
G = nn.Sequential(nn.Linear(latent, 64), nn.ReLU(), nn.Linear(64, 2))
D = nn.Sequential(nn.Linear(2, 64), nn.LeakyReLU(0.2), nn.Dropout(0.3), nn.Linear(64, 1))
opt_g = torch.optim.Adam(G.parameters(), lr=2e-4, betas=(0.5, 0.999))
opt_d = torch.optim.Adam(D.parameters(), lr=2e-4, betas=(0.5, 0.999))
bce = nn.BCEWithLogitsLoss()
real_data = TensorDataset(torch.randn(2048, 2) * 0.5 + 1.0)
loader = DataLoader(real_data, batch_size=64, shuffle=True, drop_last=True)
fixed_z = torch.randn(16, latent)

for epoch in range(50):
    torch.manual_seed(SEED)  # expect: TV028
    for (real,) in loader:
        z = torch.randn(real.size(0), latent)
        fake = G(z)
        opt_d.zero_grad()
        d_loss = bce(D(real), torch.ones(real.size(0), 1)) + \
            bce(D(fake.detach()), torch.zeros(real.size(0), 1))
        d_loss.backward()
        opt_d.step()
        opt_g.zero_grad()
        g_loss = bce(D(fake), torch.ones(real.size(0), 1))
        g_loss.backward()
        opt_g.step()
    with torch.no_grad():
        samples = G(fixed_z)
    print(epoch, d_loss.item(), g_loss.item(), samples.mean().item())
