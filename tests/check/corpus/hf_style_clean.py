"""Hugging Face style training, clean: scaled accumulation and accelerate."""
import torch
from accelerate import Accelerator
from torch.utils.data import DataLoader
from transformers import AutoModelForCausalLM, AutoTokenizer


def train(model_name="gpt2", accum=8, epochs=1):
    accelerator = Accelerator(gradient_accumulation_steps=accum)
    tokenizer = AutoTokenizer.from_pretrained(model_name)
    model = AutoModelForCausalLM.from_pretrained(model_name)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = tokenizer(["hello world"] * 32, return_tensors="pt")["input_ids"]
    loader = DataLoader(ids, batch_size=4)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    model.train()
    for epoch in range(epochs):
        for step, input_ids in enumerate(loader):
            with accelerator.accumulate(model):
                outputs = model(input_ids=input_ids, labels=input_ids)
                accelerator.backward(outputs.loss)
                optimizer.step()
                optimizer.zero_grad()
    return model


def train_manual(model, loader, optimizer, accum=4):
    model.train()
    for step, batch in enumerate(loader):
        outputs = model(**batch)
        loss = outputs.loss / accum
        loss.backward()
        if (step + 1) % accum == 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
