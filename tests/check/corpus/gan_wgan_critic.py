"""WGAN-GP style: the critic trains every batch, the generator every n_critic batches."""
import torch
from torch import nn


def make_mlp(inp, out):
    return nn.Sequential(nn.Linear(inp, 128), nn.LeakyReLU(0.2), nn.Linear(128, out))


generator = make_mlp(32, 64)
critic = make_mlp(64, 1)
opt_g = torch.optim.Adam(generator.parameters(), lr=1e-4, betas=(0.0, 0.9))
opt_c = torch.optim.Adam(critic.parameters(), lr=1e-4, betas=(0.0, 0.9))
n_critic = 5
loader = [torch.randn(16, 64) for _ in range(20)]
logs = {"c": [], "g": []}

for it, real in enumerate(loader):
    opt_c.zero_grad()
    z = torch.randn(real.size(0), 32)
    fake = generator(z).detach()
    loss_c = critic(fake).mean() - critic(real).mean()
    loss_c.backward()
    opt_c.step()
    logs["c"].append(loss_c.item())
    if it % n_critic == 0:
        opt_g.zero_grad()
        loss_g = -critic(generator(z)).mean()
        loss_g.backward()
        opt_g.step()
        logs["g"].append(loss_g.item())
