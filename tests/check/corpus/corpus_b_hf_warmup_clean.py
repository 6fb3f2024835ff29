"""Hugging Face style fine-tuning with a per-step warm-up schedule. Clean."""
import torch
from torch.utils.data import DataLoader
from transformers import AutoModelForSequenceClassification, get_linear_schedule_with_warmup


def collate(batch):
    return {k: torch.stack([b[k] for b in batch]) for k in batch[0]}


def main(train_set, epochs=3, lr=2e-5, accumulation=4):
    torch.manual_seed(42)
    device = torch.device("cuda")
    model = AutoModelForSequenceClassification.from_pretrained("bert-base-uncased",
                                                               num_labels=2)
    model.to(device)
    loader = DataLoader(train_set, batch_size=16, shuffle=True, collate_fn=collate,
                        num_workers=4, pin_memory=True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    total = epochs * len(loader) // accumulation
    scheduler = get_linear_schedule_with_warmup(optimizer, int(0.1 * total), total)
    plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, patience=1)
    model.train()
    for epoch in range(epochs):
        for step, batch in enumerate(loader):
            batch = {k: v.to(device, non_blocking=True) for k, v in batch.items()}
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(**batch).loss / accumulation
            loss.backward()
            if (step + 1) % accumulation == 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad(set_to_none=True)
        plateau.step(loss.item())
    model.save_pretrained("out")
