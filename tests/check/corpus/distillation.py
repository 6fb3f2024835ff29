"""Knowledge distillation: frozen teacher under no_grad, student trained on a KL + CE loss."""
import torch
import torch.nn as nn
import torch.nn.functional as F


def make_net(width):
    return nn.Sequential(nn.Flatten(), nn.Linear(784, width), nn.ReLU(), nn.Linear(width, 10))


teacher = make_net(1024)
student = make_net(64)
teacher.eval()
optimizer = torch.optim.SGD(student.parameters(), lr=0.05, momentum=0.9)
T, alpha = 4.0, 0.7
loader = [(torch.randn(32, 1, 28, 28), torch.randint(0, 10, (32,))) for _ in range(5)]
running = {"kd": 0.0, "ce": 0.0}

for epoch in range(2):
    student.train()
    for images, labels in loader:
        with torch.no_grad():
            teacher_logits = teacher(images)
        student_logits = student(images)
        kd = F.kl_div(F.log_softmax(student_logits / T, dim=1),
                      F.softmax(teacher_logits / T, dim=1), reduction="batchmean") * T * T
        ce = F.cross_entropy(student_logits, labels)
        loss = alpha * kd + (1 - alpha) * ce
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        running["kd"] += kd.item()
        running["ce"] += ce.item()
    student.eval()
    with torch.no_grad():
        agree = sum((student(x).argmax(1) == teacher(x).argmax(1)).sum().item()
                    for x, _ in loader)
    print(epoch, running, agree)
