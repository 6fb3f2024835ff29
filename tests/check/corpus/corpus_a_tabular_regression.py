"""Tabular regression from a CSV, numpy-heavy, in the style of many Kaggle notebooks."""
import numpy as np
import pandas as pd
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset


class TabularDataset(Dataset):
    def __init__(self, frame: pd.DataFrame, target: str):
        self.x = frame.drop(columns=[target]).to_numpy(dtype=np.float32)
        self.y = frame[target].to_numpy(dtype=np.float32)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return torch.from_numpy(self.x[i]), torch.tensor(self.y[i])


class MLP(nn.Module):
    def __init__(self, n_in):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(n_in, 128), nn.ReLU(), nn.Dropout(0.2),
                                  nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 1))

    def forward(self, x):
        return self.body(x).squeeze(-1)


def rmse(model, loader, device):
    model.train(False)  # expect: TV022
    errors = []
    with torch.no_grad():
        for x, y in loader:
            errors.append(((model(x.to(device)) - y.to(device)) ** 2).mean())
    return torch.stack(errors).mean().sqrt().item()


def main(path="train.csv", epochs=40):
    frame = pd.read_csv(path)
    order = np.random.permutation(len(frame))  # expect: TV024
    train_frame, val_frame = frame.iloc[order[:-1000]], frame.iloc[order[-1000:]]
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    train_loader = DataLoader(TabularDataset(train_frame, "price"), batch_size=256,  # expect: TV026
                              num_workers=4, pin_memory=True)
    val_loader = DataLoader(TabularDataset(val_frame, "price"), batch_size=1024)
    model = MLP(frame.shape[1] - 1).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-4)
    loss_fn = nn.SmoothL1Loss()
    for epoch in range(epochs):
        for step, (x, y) in enumerate(train_loader):
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            optimizer.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            if step % 200 == 0:
                torch.cuda.empty_cache()
        print(epoch, rmse(model, val_loader, device))


if __name__ == "__main__":
    main()
