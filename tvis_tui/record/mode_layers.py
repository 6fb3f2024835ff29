"""Layers trained in eval mode: `model.train()` forgotten after a validation.

In eval mode BatchNorm normalises with its running statistics and leaves them alone, and
Dropout drops nothing; other layers do the same in either mode. So the mode matters, and
is recorded, only for these layers, and only while they take part in training: autograd
on, and the layer's own parameters trainable (a BatchNorm frozen with its backbone is in
eval mode on purpose) or, for a layer without any (Dropout), its model's. A teacher or EMA
model run under no_grad, or a frozen feature network, is not training.
"""

from __future__ import annotations

import torch
from torch import nn

MODE_LAYERS = (nn.modules.batchnorm._NormBase, nn.modules.dropout._DropoutNd)
"""BatchNorm (and InstanceNorm with running statistics), Dropout and its kin."""


def eval_while_training(module: nn.Module, root: nn.Module) -> bool:
    """Whether `module`, called now inside model `root`, is a mode layer in eval mode taking
    part in training."""
    if module.training or not isinstance(module, MODE_LAYERS) or not torch.is_grad_enabled():
        return False
    own = list(module.parameters(recurse=False))
    return any(p.requires_grad for p in (own or root.parameters()))
