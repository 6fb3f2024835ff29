"""The torchvision fine-tuning tutorial's loop: one loop for both phases, grad enabled by phase."""
import copy
import time

import torch
import torch.nn as nn
import torch.optim as optim
from torch.optim import lr_scheduler
from torch.utils.data import DataLoader, TensorDataset


def train_model(model, dataloaders, dataset_sizes, criterion, optimizer, scheduler, device,
                num_epochs=25):
    since = time.time()
    best_model_wts = copy.deepcopy(model.state_dict())
    best_acc = 0.0
    history = {"train": [], "val": []}
    for epoch in range(num_epochs):
        for phase in ["train", "val"]:
            if phase == "train":
                model.train()
            else:
                model.eval()
            running_loss = 0.0
            running_corrects = 0
            all_preds = []
            for inputs, labels in dataloaders[phase]:
                inputs = inputs.to(device)
                labels = labels.to(device)
                optimizer.zero_grad()
                with torch.set_grad_enabled(phase == "train"):
                    outputs = model(inputs)
                    _, preds = torch.max(outputs, 1)
                    loss = criterion(outputs, labels)
                    if phase == "train":
                        loss.backward()
                        optimizer.step()
                running_loss += loss.item() * inputs.size(0)
                running_corrects += torch.sum(preds == labels.data)
                all_preds.extend(preds.tolist())
            if phase == "train":
                scheduler.step()
            epoch_loss = running_loss / dataset_sizes[phase]
            epoch_acc = running_corrects.double() / dataset_sizes[phase]
            history[phase].append(epoch_loss)
            if phase == "val" and epoch_acc > best_acc:
                best_acc = epoch_acc
                best_model_wts = copy.deepcopy(model.state_dict())
    print(f"done in {time.time() - since:.0f}s, best acc {best_acc:.4f}")
    model.load_state_dict(best_model_wts)
    return model, history


def main():
    torch.manual_seed(0)
    device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    data = TensorDataset(torch.randn(64, 3, 8, 8), torch.randint(0, 2, (64,)))
    dataloaders = {"train": DataLoader(data, batch_size=8, shuffle=True, num_workers=2),
                   "val": DataLoader(data, batch_size=8, num_workers=2)}
    sizes = {"train": 64, "val": 64}
    model = nn.Sequential(nn.Flatten(), nn.Linear(192, 2)).to(device)
    criterion = nn.CrossEntropyLoss()
    optimizer = optim.SGD(model.parameters(), lr=0.001, momentum=0.9)
    scheduler = lr_scheduler.StepLR(optimizer, step_size=7, gamma=0.1)
    train_model(model, dataloaders, sizes, criterion, optimizer, scheduler, device, 2)


if __name__ == "__main__":
    main()
