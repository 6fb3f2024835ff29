"""REINFORCE on a toy environment: log-probs are kept on purpose until the episode ends."""
import torch
import torch.nn as nn
import torch.optim as optim
from torch.distributions import Categorical


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.affine1 = nn.Linear(4, 128)
        self.affine2 = nn.Linear(128, 2)
        self.saved_log_probs = []
        self.rewards = []

    def forward(self, x):
        x = torch.relu(self.affine1(x))
        return torch.softmax(self.affine2(x), dim=1)


policy = Policy()
optimizer = optim.Adam(policy.parameters(), lr=1e-2)
eps = 1e-8


def select_action(state):
    state = torch.from_numpy(state).float().unsqueeze(0)
    probs = policy(state)
    m = Categorical(probs)
    action = m.sample()
    policy.saved_log_probs.append(m.log_prob(action))
    return action.item()


def finish_episode(gamma=0.99):
    R = 0
    returns = []
    for r in policy.rewards[::-1]:
        R = r + gamma * R
        returns.insert(0, R)
    returns = torch.tensor(returns)
    returns = (returns - returns.mean()) / (returns.std() + eps)
    policy_loss = [-log_prob * R for log_prob, R in zip(policy.saved_log_probs, returns)]
    optimizer.zero_grad()
    loss = torch.cat(policy_loss).sum()
    loss.backward()
    optimizer.step()
    del policy.rewards[:]
    del policy.saved_log_probs[:]
    return loss.item()


episode_losses = []
for episode in range(10):
    state = torch.rand(4).numpy()
    for t in range(1, 100):
        action = select_action(state)
        policy.rewards.append(1.0)
    episode_losses.append(finish_episode())
