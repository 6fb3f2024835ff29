"""Hugging Face style fine-tuning with gradient accumulation."""
import torch
from torch.utils.data import DataLoader
from transformers import AutoModelForSequenceClassification, AutoTokenizer, get_scheduler

model_name = "distilbert-base-uncased"
tokenizer = AutoTokenizer.from_pretrained(model_name)
model = AutoModelForSequenceClassification.from_pretrained(model_name, num_labels=2)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model.to(device)

texts = ["good movie", "bad movie"] * 64
labels = [1, 0] * 64
encodings = tokenizer(texts, padding=True, truncation=True, return_tensors="pt")
dataset = [{"input_ids": encodings["input_ids"][i], "attention_mask": encodings["attention_mask"][i],
            "labels": torch.tensor(labels[i])} for i in range(len(texts))]
train_dataloader = DataLoader(dataset, batch_size=8, shuffle=True)  # expect: TV024
optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5)
num_training_steps = 3 * len(train_dataloader)
lr_scheduler = get_scheduler("linear", optimizer=optimizer, num_warmup_steps=0,
                             num_training_steps=num_training_steps)
gradient_accumulation_steps = 4

model.train()
for epoch in range(3):
    for step, batch in enumerate(train_dataloader):
        batch = {k: v.to(device) for k, v in batch.items()}
        outputs = model(**batch)
        loss = outputs.loss
        loss.backward()  # expect: TV004
        if (step + 1) % gradient_accumulation_steps == 0:
            optimizer.step()
            lr_scheduler.step()
            optimizer.zero_grad()
        if step % 20 == 0:
            print(f"epoch {epoch} step {step} loss {loss.item():.4f}")

inputs = tokenizer("a fine film", return_tensors="pt")
inputs.to(device)
model.eval()
with torch.no_grad():
    prediction = model(**inputs).logits.argmax(-1)
