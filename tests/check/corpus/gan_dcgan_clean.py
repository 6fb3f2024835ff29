"""DCGAN: D ends in Sigmoid with BCELoss; G and D each zero their own gradients."""
import torch
import torch.nn as nn
import torch.optim as optim

nz, ngf, ndf = 100, 64, 64


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(
            nn.ConvTranspose2d(nz, ngf * 8, 4, 1, 0, bias=False), nn.BatchNorm2d(ngf * 8),
            nn.ReLU(True), nn.ConvTranspose2d(ngf * 8, 3, 4, 2, 1, bias=False), nn.Tanh())

    def forward(self, input):
        return self.main(input)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(
            nn.Conv2d(3, ndf, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf, 1, 4, 1, 0, bias=False), nn.Sigmoid())

    def forward(self, input):
        return self.main(input).view(-1, 1).squeeze(1)


device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
netG = Generator().to(device)
netD = Discriminator().to(device)
criterion = nn.BCELoss()
fixed_noise = torch.randn(64, nz, 1, 1, device=device)
optimizerD = optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
optimizerG = optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
dataloader = [torch.randn(16, 3, 8, 8) for _ in range(4)]
G_losses, D_losses = [], []

for epoch in range(2):
    for i, data in enumerate(dataloader):
        netD.zero_grad()
        real = data.to(device)
        label = torch.full((real.size(0),), 1.0, device=device)
        errD_real = criterion(netD(real), label)
        errD_real.backward()
        noise = torch.randn(real.size(0), nz, 1, 1, device=device)
        fake = netG(noise)
        label.fill_(0.0)
        errD_fake = criterion(netD(fake.detach()), label)
        errD_fake.backward()
        errD = errD_real + errD_fake
        optimizerD.step()

        netG.zero_grad()
        label.fill_(1.0)
        errG = criterion(netD(fake), label)
        errG.backward()
        optimizerG.step()
        G_losses.append(errG.item())
        D_losses.append(errD.item())
    with torch.no_grad():
        samples = netG(fixed_noise).detach().cpu()
