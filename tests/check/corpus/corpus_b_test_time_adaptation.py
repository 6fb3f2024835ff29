"""Test-time adaptation (TENT-like) of a trained classifier on a shifted test stream."""
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)


def entropy(logits):
    return -(logits.softmax(1) * logits.log_softmax(1)).sum(1).mean()


def norm_parameters(model):
    return [p for m in model.modules() if isinstance(m, nn.BatchNorm2d) for p in m.parameters()]


@torch.no_grad()
def tent(model, optimizer, stream):
    """Right: gradients are switched back on around the adaptation step."""
    predictions = []
    for x in stream:
        with torch.enable_grad():
            loss = entropy(model(x))
            loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        predictions.append(model(x).argmax(1))
    return torch.cat(predictions)


@torch.inference_mode()
def adapt_then_predict(model, optimizer, stream):
    """Wrong: the adaptation loss is computed under inference_mode."""
    predictions = []
    for x in stream:
        logits = model(x)
        entropy(logits).backward()  # expect: TV034
        optimizer.step()
        optimizer.zero_grad()
        predictions.append(logits.argmax(1))
    return torch.cat(predictions)


def pseudo_label_round(model, optimizer, stream):
    """Right: pseudo-labels come from a no_grad pass, the loss from a graded one."""
    for x in stream:
        with torch.no_grad():
            target = model(x).argmax(1)
        optimizer.zero_grad()
        F.cross_entropy(model(x), target).backward()
        optimizer.step()


def main():
    model = torch.load("classifier_full.pt", map_location="cpu", weights_only=False)
    model.train()
    optimizer = torch.optim.SGD(norm_parameters(model), lr=1e-3, momentum=0.9)
    stream = [torch.randn(64, 3, 32, 32) for _ in range(100)]
    tent(model, optimizer, stream)
    adapt_then_predict(model, optimizer, stream)
    pseudo_label_round(model, optimizer, stream)


if __name__ == "__main__":
    main()
