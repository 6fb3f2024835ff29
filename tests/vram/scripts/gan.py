"""A GAN: two models, each stepped by its own Adam; the discriminator also runs in the
generator's step."""
import torch
import torch.nn as nn

LATENT = 128
IMAGE = 3 * 32 * 32
BATCH = 64

G = nn.Sequential(nn.Linear(LATENT, 1024), nn.ReLU(), nn.Linear(1024, IMAGE), nn.Tanh())
D = nn.Sequential(nn.Linear(IMAGE, 1024), nn.LeakyReLU(0.2), nn.Linear(1024, 1))
opt_g = torch.optim.Adam(G.parameters(), lr=2e-4, betas=(0.5, 0.999))
opt_d = torch.optim.Adam(D.parameters(), lr=2e-4, betas=(0.5, 0.999))
bce = nn.BCEWithLogitsLoss()

for step in range(100):
    real = torch.rand(BATCH, IMAGE) * 2 - 1
    fake = G(torch.randn(BATCH, LATENT))
    d_loss = bce(D(real), torch.ones(BATCH, 1)) + bce(D(fake.detach()), torch.zeros(BATCH, 1))
    opt_d.zero_grad()
    d_loss.backward()
    opt_d.step()
    g_loss = bce(D(fake), torch.ones(BATCH, 1))
    opt_g.zero_grad()
    g_loss.backward()
    opt_g.step()
