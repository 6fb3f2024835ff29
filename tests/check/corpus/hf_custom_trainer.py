"""A Hugging Face Trainer subclass with a custom loss and a hand-written evaluation."""
import torch
import torch.nn.functional as F
from transformers import AutoModelForSequenceClassification, Trainer, TrainingArguments


class WeightedTrainer(Trainer):
    def __init__(self, *args, class_weights=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.class_weights = class_weights

    def compute_loss(self, model, inputs, return_outputs=False, **kwargs):
        labels = inputs.pop("labels")
        outputs = model(**inputs)
        probs = torch.softmax(outputs.logits, dim=-1)
        loss = F.cross_entropy(probs, labels, weight=self.class_weights)  # expect: TV005
        return (loss, outputs) if return_outputs else loss

    def quick_eval(self, loader):
        self.model.eval()
        correct = 0
        for batch in loader:
            labels = batch.pop("labels")
            logits = self.model(**batch).logits  # expect: TV008
            correct += (logits.argmax(-1) == labels).sum().item()
        self.model.train()
        return correct


def main(train_ds, eval_ds):
    model = AutoModelForSequenceClassification.from_pretrained("bert-base-uncased", num_labels=3)
    args = TrainingArguments(output_dir="out", per_device_train_batch_size=16,
                             gradient_accumulation_steps=4, num_train_epochs=1)
    trainer = WeightedTrainer(model=model, args=args, train_dataset=train_ds,
                              eval_dataset=eval_ds, class_weights=torch.tensor([1.0, 2.0, 1.0]))
    trainer.train()
    return trainer.evaluate()
