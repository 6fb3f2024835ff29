"""Training and evaluation steps shared by the scripts."""
import torch
import torch.nn.functional as F


def fit_batch(model, optimizer, images, masks):
    optimizer.zero_grad(set_to_none=True)
    loss = F.cross_entropy(model(images), masks)
    loss.backward()
    optimizer.step()
    return loss.detach()


@torch.no_grad()
def evaluate(model, loader):
    model.eval()
    total = 0.0
    for images, masks in loader:
        total += F.cross_entropy(model(images.cuda()), masks.cuda()).item()
    model.train()
    return total / len(loader)
