"""Hugging Face-ish text classifier with a hand-written loop and a custom Dataset."""
import random

import torch
from torch.utils.data import DataLoader, Dataset
from transformers import AutoModelForSequenceClassification, AutoTokenizer

SYNONYMS = {"good": ["great", "fine"], "bad": ["awful", "poor"]}


class ReviewDataset(Dataset):
    def __init__(self, texts, labels, tokenizer, augment=False):
        self.texts, self.labels = texts, labels
        self.tokenizer = tokenizer
        self.augment = augment

    def __len__(self):
        return len(self.texts)

    def __getitem__(self, i):
        words = self.texts[i].split()
        if self.augment:
            words = [random.choice(SYNONYMS.get(w, [w])) for w in words]  # expect: TV024
        enc = self.tokenizer(" ".join(words), truncation=True, padding="max_length",
                             max_length=64, return_tensors="pt")
        item = {k: v.squeeze(0) for k, v in enc.items()}
        item["labels"] = torch.tensor(self.labels[i])
        return item


def train(model_name="distilbert-base-uncased", epochs=3):
    tokenizer = AutoTokenizer.from_pretrained(model_name)
    model = AutoModelForSequenceClassification.from_pretrained(model_name, num_labels=2).cuda()
    texts = ["good movie", "bad movie", "good plot", "bad acting"] * 100
    labels = [1, 0, 1, 0] * 100
    train_set = ReviewDataset(texts, labels, tokenizer, augment=True)
    loader = DataLoader(train_set, batch_size=16, num_workers=4, pin_memory=True)  # expect: TV026
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5)
    model.train()
    for epoch in range(epochs):
        for step, batch in enumerate(loader):
            batch = {k: v.cuda(non_blocking=True) for k, v in batch.items()}
            outputs = model(**batch)
            outputs.loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            torch.cuda.empty_cache()  # expect: TV029
            if step % 50 == 0:
                print(epoch, step, outputs.loss.item())
    model.save_pretrained("out")


if __name__ == "__main__":
    train()
