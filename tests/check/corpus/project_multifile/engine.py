import torch


def train_one_epoch(model, loader, optimizer, criterion, device, accum_steps=4):
    model.train()
    optimizer.zero_grad()
    seen = 0
    for i, (images, targets) in enumerate(loader):
        images, targets = images.to(device), targets.to(device)
        loss = criterion(model(images), targets)
        loss.backward()  # expect: TV004
        if (i + 1) % accum_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
        seen += images.size(0)
    return seen


def evaluate(model, loader, device):
    model.eval()
    correct = total = 0
    for images, targets in loader:
        images, targets = images.to(device), targets.to(device)
        logits = model(images)  # expect: TV008
        correct += (logits.argmax(1) == targets).sum().item()
        total += targets.numel()
    return correct / total


@torch.no_grad()
def predict(model, loader, device):
    model.eval()
    outputs = []
    for images, _ in loader:
        outputs.append(model(images.to(device)).softmax(-1).cpu())
    return torch.cat(outputs)
