"""DCGAN-style training with separate schedules for critic and generator, fp16 with a scaler,
and a resumable checkpoint. Clean: every look-alike of TV030-TV039 done right."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.optim.lr_scheduler import ExponentialLR, StepLR

torch.manual_seed(1234)
device = torch.device("cuda")


class Generator(nn.Module):
    def __init__(self, z_dim=100):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(z_dim, 256), nn.ReLU(), nn.Linear(256, 784), nn.Tanh())

    def forward(self, z):
        return self.net(z)


class Critic(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 256)
        self.fc2 = nn.Linear(256, 1)

    def forward(self, x):
        h = F.leaky_relu(self.fc1(x), 0.2)
        return self.fc2(F.dropout(h, 0.3, self.training))


generator, critic = Generator().to(device), Critic().to(device)
opt_g = torch.optim.Adam(generator.parameters(), lr=2e-4, betas=(0.5, 0.999))
opt_c = torch.optim.Adam(critic.parameters(), lr=2e-4, betas=(0.5, 0.999))
sched_g = StepLR(opt_g, step_size=30, gamma=0.5)
sched_c = ExponentialLR(opt_c, gamma=0.99)
scaler = torch.amp.GradScaler("cuda")
start_epoch = 0
try:
    state = torch.load("gan_last.pt", map_location=device, weights_only=True)
    generator.load_state_dict(state["generator"])
    critic.load_state_dict(state["critic"])
    start_epoch = int(state["epoch"]) + 1
except FileNotFoundError:
    pass

loader = torch.utils.data.DataLoader(torch.randn(60000, 784), batch_size=128, shuffle=True,
                                     num_workers=4, pin_memory=True)
n_critic = 5
for epoch in range(start_epoch, 100):
    for i, real in enumerate(loader):
        real = real.to(device, non_blocking=True)
        z = torch.randn(real.size(0), 100, device=device)
        opt_c.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.float16):
            with torch.no_grad():
                fake = generator(z)
            loss_c = F.softplus(critic(fake)).mean() + F.softplus(-critic(real)).mean()
        scaler.scale(loss_c).backward()
        scaler.unscale_(opt_c)
        nn.utils.clip_grad_norm_(critic.parameters(), 10.0)
        scaler.step(opt_c)
        if i % n_critic == 0:
            opt_g.zero_grad(set_to_none=True)
            with torch.autocast("cuda", dtype=torch.float16):
                loss_g = F.softplus(-critic(generator(z))).mean()
            scaler.scale(loss_g).backward()
            scaler.step(opt_g)
        scaler.update()
    sched_c.step()
    sched_g.step()
    torch.save({"generator": generator.state_dict(), "critic": critic.state_dict(),
                "epoch": epoch}, "gan_last.pt")
