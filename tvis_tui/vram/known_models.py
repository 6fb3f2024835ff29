"""Common pretrained models by name: parameter counts and activation figures.

Vision models carry the bytes a float32 training forward keeps per 224x224 image (measured
with torch on CPU, rounded; they scale with pixel count). Language models carry their shape;
their activations follow Korthikanti et al. (2022): per layer and token,
34*h + 5*heads*seq bytes in 16-bit, doubled for float32, plus the logits and their
log-softmax.
"""

from __future__ import annotations

from typing import Any

from tvis_tui.vram.tape import Tape
from tvis_tui.vram.values import Instance, Module, Param, Tensor, Unknown

MB = 1_000_000

# name: (parameters, classifier input width, float32 activation bytes per 224px image)
VISION: dict[str, tuple[int, int, int]] = {
    "resnet18": (11_689_512, 512, 38 * MB), "resnet34": (21_797_672, 512, 58 * MB),
    "resnet50": (25_557_032, 2048, 148 * MB), "resnet101": (44_549_160, 2048, 218 * MB),
    "resnet152": (60_192_808, 2048, 305 * MB), "wide_resnet50_2": (68_883_240, 2048, 210 * MB),
    "resnext50_32x4d": (25_028_904, 2048, 190 * MB), "vgg16": (138_357_544, 4096, 190 * MB),
    "vgg19": (143_667_240, 4096, 215 * MB), "alexnet": (61_100_840, 4096, 8 * MB),
    "mobilenet_v2": (3_504_872, 1280, 95 * MB), "mobilenet_v3_large": (5_483_032, 1280, 60 * MB),
    "efficientnet_b0": (5_288_548, 1280, 110 * MB), "efficientnet_b4": (19_341_616, 1792, 330 * MB),
    "densenet121": (7_978_856, 1024, 165 * MB), "inception_v3": (27_161_264, 2048, 120 * MB),
    "convnext_tiny": (28_589_128, 768, 140 * MB), "convnext_base": (88_591_464, 1024, 300 * MB),
    "vit_b_16": (86_567_656, 768, 120 * MB), "vit_l_16": (304_326_632, 1024, 380 * MB),
    "vit_base_patch16_224": (86_567_656, 768, 120 * MB), "swin_t": (28_288_354, 768, 150 * MB),
    "regnet_y_16gf": (83_590_140, 3024, 250 * MB),
}

# name: (parameters, layers, hidden, heads, vocabulary)
LANGUAGE: dict[str, tuple[int, int, int, int, int]] = {
    "gpt2": (124_439_808, 12, 768, 12, 50257), "gpt2-medium": (354_823_168, 24, 1024, 16, 50257),
    "gpt2-large": (774_030_080, 36, 1280, 20, 50257), "gpt2-xl": (1_557_611_200, 48, 1600, 25, 50257),
    "distilgpt2": (81_912_576, 6, 768, 12, 50257),
    "bert-base-uncased": (109_482_240, 12, 768, 12, 30522),
    "bert-large-uncased": (335_141_888, 24, 1024, 16, 30522),
    "roberta-base": (124_645_632, 12, 768, 12, 50265),
    "distilbert-base-uncased": (66_362_880, 6, 768, 12, 30522),
    "t5-small": (60_506_624, 12, 512, 8, 32128), "t5-base": (222_903_552, 24, 768, 12, 32128),
    "facebook/opt-125m": (125_239_296, 12, 768, 12, 50272),
    "facebook/opt-1.3b": (1_315_758_080, 24, 2048, 32, 50272),
    "EleutherAI/pythia-160m": (162_322_944, 12, 768, 12, 50304),
    "EleutherAI/pythia-1.4b": (1_414_647_808, 24, 2048, 16, 50304),
    "TinyLlama/TinyLlama-1.1B-Chat-v1.0": (1_100_048_384, 22, 2048, 32, 32000),
    "Qwen/Qwen2.5-0.5B": (494_032_768, 24, 896, 14, 151936),
    "Qwen/Qwen2.5-1.5B": (1_543_714_304, 28, 1536, 12, 151936),
    "microsoft/phi-2": (2_779_683_840, 32, 2560, 32, 51200),
    "meta-llama/Llama-2-7b-hf": (6_738_415_616, 32, 4096, 32, 32000),
    "meta-llama/Meta-Llama-3-8B": (8_030_261_248, 32, 4096, 32, 128256),
    "meta-llama/Llama-3.1-8B": (8_030_261_248, 32, 4096, 32, 128256),
    "meta-llama/Llama-3.2-1B": (1_235_814_400, 16, 2048, 32, 128256),
    "mistralai/Mistral-7B-v0.1": (7_241_732_096, 32, 4096, 32, 32000),
}


def _lookup(name: str) -> tuple[str, str] | None:
    if name in VISION:
        return "vision", name
    if name in LANGUAGE:
        return "language", name
    short = {k.split("/")[-1].lower(): k for k in LANGUAGE}
    key = name.split("/")[-1].lower()
    return ("language", short[key]) if key in short else None


def build(path: str, args: list, kwargs: dict, line: int) -> Module | None:
    """A known model for `torchvision.models.resnet50(...)`, `timm.create_model("x")` or
    `AutoModel*.from_pretrained("x")`; None when `path` names none of them."""
    parts = path.split(".")
    if parts[-1] in ("create_model", "from_pretrained") and args and isinstance(args[0], str):
        name = args[0]
    elif parts[0] in ("torchvision", "timm") or "models" in parts:
        name = parts[-1]
    else:
        return None
    found = _lookup(name)
    if found is None:
        return None
    kind, key = found
    module = Module(key, line=line, config={"family": kind})
    if kind == "vision":
        params, head, _ = VISION[key]
        classes = kwargs.get("num_classes", 1000)
        if isinstance(classes, int):
            params += (head + 1) * (classes - 1000)
        module.config["classes"] = classes if isinstance(classes, int) else 1000
    else:
        params = LANGUAGE[key][0]
    module.known_params = params
    module.attrs["weights"] = Param((params,))
    return module


def forward(tape: Tape, module: Module, args: list, line: int) -> Any:
    x = args[0] if args else None
    if not isinstance(x, Tensor) or not x.shape:
        return Unknown("known model input")
    tape.guessed += 1  # a per-model figure, not followed layer by layer
    dtype = tape.compute_dtype("linear", "float32")
    scale = 0.5 if dtype in ("bfloat16", "float16") else 1.0
    if module.config.get("family") == "vision":
        pixels = x.shape[-1] * x.shape[-2] if len(x.shape) >= 3 else 224 * 224
        kept = int(VISION[module.kind][2] * x.shape[0] * pixels / (224 * 224) * scale)
        out = Tensor((x.shape[0], module.config.get("classes", 1000)), dtype)
    else:
        _, layers, hidden, heads, vocab = LANGUAGE[module.kind]
        b, s = x.shape[0], x.shape[-1]
        kept = int(layers * s * b * hidden * (34 + 5 * heads * s / hidden) * 2 * scale)
        out = Tensor((b, s, vocab), dtype)
    params = [p for p in module.attrs.values() if isinstance(p, Param)]
    tape.record(module.kind, [x], [out], [Tensor((kept,), "uint8")], params, line)
    if module.config.get("family") == "language":
        loss = cross_entropy_like(tape, out, line)
        return Instance(None, {"logits": out, "loss": loss})
    return out


def cross_entropy_like(tape: Tape, logits: Tensor, line: int) -> Tensor:
    logp = Tensor(logits.shape, "float32")
    tape.record("log_softmax", [logits], [logp], [logp], line=line)
    loss = Tensor((), "float32")
    tape.record("nll_loss", [logp], [loss], [], line=line)
    return loss
