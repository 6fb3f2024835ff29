"""A convolutional VAE: LeakyReLU, BatchNorm, ConvTranspose2d, reparameterisation, BCE + KL
loss, Adam."""
import torch, torch.nn as nn, torch.nn.functional as F
class VAE(nn.Module):
    def __init__(self, z=32):
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(1, 32, 4, 2, 1), nn.LeakyReLU(0.2), nn.Conv2d(32, 64, 4, 2, 1), nn.BatchNorm2d(64), nn.LeakyReLU(0.2), nn.Flatten())
        self.mu = nn.Linear(64 * 7 * 7, z)
        self.logvar = nn.Linear(64 * 7 * 7, z)
        self.dec_in = nn.Linear(z, 64 * 7 * 7)
        self.dec = nn.Sequential(nn.ConvTranspose2d(64, 32, 4, 2, 1), nn.ReLU(), nn.ConvTranspose2d(32, 1, 4, 2, 1))
    def forward(self, x):
        h = self.enc(x)
        mu, logvar = self.mu(h), self.logvar(h)
        z = mu + torch.randn_like(mu) * torch.exp(0.5 * logvar)
        out = self.dec(self.dec_in(z).view(-1, 64, 7, 7))
        return torch.sigmoid(out), mu, logvar
model = VAE()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(5):
    x = torch.rand(1024, 1, 28, 28)
    recon, mu, logvar = model(x)
    rec = F.binary_cross_entropy(recon, x, reduction="sum")
    kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    loss = rec + kld
    opt.zero_grad()
    loss.backward()
    opt.step()
