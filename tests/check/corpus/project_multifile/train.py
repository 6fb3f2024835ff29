import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

from engine import evaluate, predict, train_one_epoch
from models import TinyResNet


def main():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    data = TensorDataset(torch.randn(64, 3, 16, 16), torch.randint(0, 10, (64,)))
    train_loader = DataLoader(data, batch_size=8, shuffle=True, num_workers=2, pin_memory=True)  # expect: TV024
    val_loader = DataLoader(data, batch_size=32)
    model = TinyResNet().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True)
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    history = []
    for epoch in range(5):
        history.append(train_one_epoch(model, train_loader, optimizer, criterion, device))
        print(epoch, evaluate(model, val_loader, device))
    probabilities = predict(model, val_loader, device)
    print(probabilities.shape, history)


if __name__ == "__main__":
    main()
