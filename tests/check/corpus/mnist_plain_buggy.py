"""The same script with the classic mistakes."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.relu(self.fc1(x.flatten(1)))
        return F.softmax(self.fc2(x), dim=1)


device = "cuda" if torch.cuda.is_available() else "cpu"
train_loader = DataLoader(TensorDataset(torch.randn(256, 784), torch.randint(0, 10, (256,))),  # expect: TV024
                          batch_size=32, shuffle=True)
test_loader = DataLoader(TensorDataset(torch.randn(64, 784), torch.randint(0, 10, (64,))),
                         batch_size=64)
model = Net().to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
criterion = nn.CrossEntropyLoss()

train_losses = []
for epoch in range(3):
    model.train()
    for data, target in train_loader:
        data.to(device)  # expect: TV009
        target.to(device)  # expect: TV009
        optimizer.zero_grad()
        output = model(data)
        loss = criterion(output, target)  # expect: TV005
        loss.backward()
        optimizer.step()
        train_losses.append(loss)  # expect: TV001

    model.eval()
    correct = 0
    for data, target in test_loader:
        output = model(data)  # expect: TV008
        correct += (output.argmax(1) == target).sum().item()
    print(epoch, correct)
