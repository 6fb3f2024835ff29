"""What a qualified class or function name produces: an optimizer, a model, a loss, a loader.

These tables are the only place the engine knows library names; rules ask `Project.is_*`.
"""

from __future__ import annotations

import re

OPTIMIZER_PREFIXES = (
    "torch.optim.", "bitsandbytes.optim.", "apex.optimizers.", "deepspeed.ops.adam.",
    "timm.optim.", "torch_optimizer.", "lion_pytorch.",
)
OPTIMIZER_NAMES = frozenset({"transformers.AdamW", "transformers.Adafactor",
                             "transformers.optimization.AdamW",
                             "transformers.optimization.Adafactor"})
OPTIMIZER_BASES = frozenset({"torch.optim.Optimizer", "torch.optim.optimizer.Optimizer"})
OPTIMIZER_NAME = re.compile(r"(^|_)(opt|optim|optimizer|optimiser)(_?[a-z0-9]*)?$")
"""Names that mark an optimizer when its type cannot be proven (an untyped parameter)."""
NOT_OPTIMIZERS = ("torch.optim.lr_scheduler.", "torch.optim.swa_utils.")

MODULE_BASES = frozenset({
    "torch.nn.Module", "torch.nn.modules.module.Module",
    "pytorch_lightning.LightningModule", "lightning.LightningModule",
    "lightning.pytorch.LightningModule", "pl.LightningModule",
    "transformers.PreTrainedModel",
})
LIGHTNING_BASES = frozenset({"pytorch_lightning.LightningModule", "lightning.LightningModule",
                             "lightning.pytorch.LightningModule"})
MODEL_WRAPPERS = frozenset({
    "torch.nn.parallel.DistributedDataParallel", "torch.nn.DataParallel",
    "torch.nn.parallel.DataParallel",
    "torch.distributed.fsdp.FullyShardedDataParallel",
})
MODEL_FACTORY_PREFIXES = ("torchvision.models.", "timm.create_model", "transformers.Auto",
                          "transformers.")
LOSS_PREFIX = "torch.nn."

DATALOADERS = frozenset({"torch.utils.data.DataLoader",
                         "torch.utils.data.dataloader.DataLoader"})
NO_GRAD_CONTEXTS = frozenset({"torch.no_grad", "torch.inference_mode",
                              "torch.autograd.no_grad", "torch.autograd.grad_mode.no_grad"})
GRAD_ENABLING_CONTEXTS = frozenset({"torch.enable_grad", "torch.autograd.enable_grad",
                                    "torch.autograd.grad_mode.enable_grad"})
SELF_RETURNING_METHODS = frozenset({"to", "cuda", "cpu", "train", "eval", "float", "half",
                                    "double", "bfloat16", "requires_grad_", "share_memory"})


def is_optimizer_class(qualname: str) -> bool:
    if qualname in OPTIMIZER_NAMES:
        return True
    if qualname.startswith(NOT_OPTIMIZERS) or qualname in OPTIMIZER_BASES:
        return False
    last = qualname.rsplit(".", 1)[-1]
    return qualname.startswith(OPTIMIZER_PREFIXES) and last[:1].isupper()


def is_loss_class(qualname: str) -> bool:
    return (qualname.startswith(LOSS_PREFIX) and qualname.count(".") == 2
            and qualname.endswith("Loss"))


def is_torch_module_class(qualname: str) -> bool:
    """`torch.nn.Linear`, `torch.nn.Sequential` (a module built from torch.nn), not a loss."""
    if qualname in MODEL_WRAPPERS:
        return True
    if not qualname.startswith(LOSS_PREFIX) or is_loss_class(qualname):
        return False
    last = qualname.rsplit(".", 1)[-1]
    return qualname.count(".") == 2 and last[:1].isupper() and last != "Parameter"


def is_model_factory(qualname: str) -> bool:
    """Calls that return a ready nn.Module: torchvision/timm constructors, HF `from_pretrained`."""
    if qualname.startswith("transformers."):
        return qualname.endswith(".from_pretrained") and "Tokenizer" not in qualname \
            and "Config" not in qualname and "Processor" not in qualname
    return qualname.startswith(MODEL_FACTORY_PREFIXES[:2])


ALIASED_LIBRARIES = frozenset({"torch"})
"""Libraries whose names are followed through plain assignments (`nn = torch.nn`,
`F = nn.functional`) as if imported: the rules' tables name torch, and an alias of anything
else would only make unknown names look known."""

STAR_EXPORTS: dict[str, frozenset[str]] = {
    "torch": frozenset({
        "tensor", "as_tensor", "from_numpy", "zeros", "zeros_like", "ones", "empty", "full",
        "eye", "arange", "linspace", "rand", "randn", "randint", "scalar_tensor",
        "manual_seed", "no_grad", "enable_grad", "inference_mode", "set_grad_enabled",
        "autocast", "load", "compile", "softmax", "log_softmax", "sigmoid", "device",
        "Tensor", "FloatTensor", "LongTensor"}),
    "torch.optim": frozenset({
        "SGD", "Adam", "AdamW", "Adamax", "Adagrad", "Adadelta", "ASGD", "LBFGS", "NAdam",
        "RAdam", "RMSprop", "Rprop", "SparseAdam", "Adafactor", "Optimizer"}),
    "torch.optim.lr_scheduler": frozenset({
        "LambdaLR", "MultiplicativeLR", "StepLR", "MultiStepLR", "ConstantLR", "LinearLR",
        "ExponentialLR", "PolynomialLR", "CosineAnnealingLR", "ChainedScheduler",
        "SequentialLR", "ReduceLROnPlateau", "CyclicLR", "OneCycleLR",
        "CosineAnnealingWarmRestarts", "LRScheduler"}),
    "torch.utils.data": frozenset({
        "DataLoader", "Dataset", "IterableDataset", "TensorDataset", "ConcatDataset",
        "ChainDataset", "Subset", "StackDataset", "random_split", "Sampler", "RandomSampler",
        "SequentialSampler", "BatchSampler", "SubsetRandomSampler", "WeightedRandomSampler",
        "DistributedSampler", "default_collate", "get_worker_info"}),
    "torch.nn.functional": frozenset({
        "softmax", "log_softmax", "sigmoid", "relu", "gelu", "silu", "tanh", "dropout",
        "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout",
        "one_hot", "normalize", "linear",
        "cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
        "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div",
        "cosine_embedding_loss", "margin_ranking_loss", "triplet_margin_loss", "ctc_loss",
        "poisson_nll_loss", "gaussian_nll_loss", "soft_margin_loss", "multi_margin_loss",
        "hinge_embedding_loss"}),
}
"""What `from MODULE import *` brings in, for the torch modules whose names the engine knows
(the functions, optimizers, schedulers and loaders its tables and rules name)."""
STAR_CAPITALISED = frozenset({"torch.nn"})
"""Modules whose every capitalised public name is a class the engine recognises by prefix
(`torch.nn.X`: a layer, container or loss), so `from torch.nn import *` needs no list."""


def star_origin(name: str, star_modules: list[str]) -> str | None:
    """The module a bare `name` comes from through the file's `from M import *` lines (in
    order), or None. A later star import shadows an earlier one, as in Python; the listed
    names are checked before the capitalised-class guess, so `StepLR` is a scheduler even
    after `from torch.nn import *`."""
    for module in reversed(star_modules):
        if name in STAR_EXPORTS.get(module, ()):
            return module
    for module in reversed(star_modules):
        if module in STAR_CAPITALISED and name[:1].isupper() and name != "Parameter":
            return module
    return None
