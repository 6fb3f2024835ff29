"""Transfer learning the torchvision way: an epoch-level StepLR stepped after each epoch, a
new head built before the optimizer, a frozen feature extractor, and k-fold restarts that
build a fresh model and optimizer per fold. Clean."""
import copy
import time

import torch
import torch.nn as nn
import torch.optim as optim
from torch.optim import lr_scheduler
from torchvision import datasets, models, transforms

torch.manual_seed(0)
device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")


def run_epoch(model, criterion, optimizer, loader):
    model.train()
    for inputs, labels in loader:
        optimizer.zero_grad()
        criterion(model(inputs.to(device)), labels.to(device)).backward()
        optimizer.step()


@torch.no_grad()
def accuracy(model, loader):
    model.eval()
    hits = sum((model(x.to(device)).argmax(1) == y.to(device)).sum().item() for x, y in loader)
    return hits / len(loader.dataset)


def train_model(model, criterion, optimizer, scheduler, dataloaders, num_epochs=25):
    since = time.time()
    best_wts, best_acc = copy.deepcopy(model.state_dict()), 0.0
    for epoch in range(num_epochs):
        run_epoch(model, criterion, optimizer, dataloaders["train"])
        scheduler.step()
        acc = accuracy(model, dataloaders["val"])
        if acc > best_acc:
            best_acc, best_wts = acc, copy.deepcopy(model.state_dict())
    print(f"done in {time.time() - since:.0f}s, best val acc {best_acc:.4f}")
    model.load_state_dict(best_wts)
    return model


def loaders(root):
    tf = transforms.Compose([transforms.RandomResizedCrop(224), transforms.ToTensor()])
    sets = {x: datasets.ImageFolder(f"{root}/{x}", tf) for x in ["train", "val"]}
    return {x: torch.utils.data.DataLoader(sets[x], batch_size=4, shuffle=x == "train",
                                           num_workers=4, pin_memory=True) for x in sets}


def finetune(dataloaders):
    model_ft = models.resnet18(weights="IMAGENET1K_V1")
    model_ft.fc = nn.Linear(model_ft.fc.in_features, 2)
    model_ft = model_ft.to(device)
    optimizer_ft = optim.SGD(model_ft.parameters(), lr=0.001, momentum=0.9)
    exp_lr_scheduler = lr_scheduler.StepLR(optimizer_ft, step_size=7, gamma=0.1)
    return train_model(model_ft, nn.CrossEntropyLoss(), optimizer_ft, exp_lr_scheduler,
                       dataloaders)


def feature_extractor(dataloaders):
    model_conv = models.resnet18(weights="IMAGENET1K_V1")
    for param in model_conv.parameters():
        param.requires_grad = False
    model_conv.fc = nn.Linear(model_conv.fc.in_features, 2)
    model_conv = model_conv.to(device)
    optimizer_conv = optim.SGD(model_conv.fc.parameters(), lr=0.001, momentum=0.9)
    scheduler = lr_scheduler.StepLR(optimizer_conv, step_size=7, gamma=0.1)
    return train_model(model_conv, nn.CrossEntropyLoss(), optimizer_conv, scheduler,
                       dataloaders)


def k_fold(dataloaders, folds=5):
    scores = []
    for fold in range(folds):
        model = models.resnet18(num_classes=2).to(device)
        optimizer = optim.Adam(model.parameters(), lr=1e-3)
        scheduler = lr_scheduler.CosineAnnealingLR(optimizer, T_max=10)
        scores.append(train_model(model, nn.CrossEntropyLoss(), optimizer, scheduler,
                                  dataloaders, num_epochs=10))
    return scores


if __name__ == "__main__":
    data = loaders("data/hymenoptera_data")
    finetune(data)
    feature_extractor(data)
    k_fold(data)
