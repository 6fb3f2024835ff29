"""Calibrate batch-norm statistics on the new domain, then fine-tune."""
import torch
from torch.optim.lr_scheduler import MultiStepLR

from engine import evaluate, fit_batch
from nets import SegNet

torch.manual_seed(7)
model = SegNet().cuda()
state = torch.load("segnet_voc.pt", map_location="cuda", weights_only=True)
model.load_state_dict(state)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
scheduler = MultiStepLR(optimizer, milestones=[30, 45], gamma=0.1)
train_loader = torch.utils.data.DataLoader(torch.load("cityscapes_train.pt",  # expect: TV035
                                                      map_location="cpu"),
                                           batch_size=8, shuffle=True, num_workers=8,
                                           pin_memory=True)
val_loader = torch.utils.data.DataLoader(torch.load("cityscapes_val.pt", "cpu",
                                                    weights_only=True),
                                         batch_size=8, num_workers=8, pin_memory=True)

# "calibration" pass: someone wrapped the whole first epoch in no_grad
with torch.no_grad():
    for images, masks in train_loader:
        fit_batch(model, optimizer, images.cuda(), masks.cuda())  # expect: TV034

for epoch in range(60):
    model.train()
    for images, masks in train_loader:
        fit_batch(model, optimizer, images.cuda(non_blocking=True), masks.cuda(non_blocking=True))
    scheduler.step()
    print(epoch, evaluate(model, val_loader))
