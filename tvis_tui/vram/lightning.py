"""PyTorch Lightning as the static reader follows it: a LightningModule is an nn.Module,
and `Trainer(...).fit(model, ...)` is the training loop, run once the way Lightning runs
it: `configure_optimizers()`, one batch of the train dataloader (given to `fit`, or from a
datamodule's or the model's `train_dataloader()`), `training_step(batch, 0)` under the
Trainer's precision, then backward and every optimizer's step. A module with
`automatic_optimization = False` calls `self.manual_backward(loss)` and `opt.step()`
itself; `self.optimizers()` gives what `configure_optimizers()` returned."""

from __future__ import annotations

from typing import Any

from tree_sitter import Node

from tvis_tui.vram.interp import Scope
from tvis_tui.vram.values import UNKNOWN, Instance, Loader, Module, Optimizer, Unknown

PACKAGES = {"lightning", "pytorch_lightning"}
"""Where Lightning's names come from (`transformers.Trainer` is another trainer)."""

MODULE_BASES = {"LightningModule"}

STRATEGIES = {"FSDPStrategy": "fsdp", "DDPStrategy": "ddp", "DeepSpeedStrategy": "deepspeed"}

MODULE_METHODS = {"optimizers", "manual_backward"}
"""What a LightningModule's training_step calls on itself that the reader follows."""

_MIXED = {"16-mixed": "float16", "16": "float16", "bf16-mixed": "bfloat16", "bf16": "bfloat16"}
_TRUE = {"16-true": "float16", "bf16-true": "bfloat16", "64-true": "float64", "64": "float64"}
_OPTIMIZERS_OF = "_lightning_optimizers"
"""The attribute of a model `fit` ran on that holds what its configure_optimizers() gave."""


def call(api: Any, name: str, args: list, kwargs: dict, at: int) -> Any:
    """A Lightning name called: a Trainer, or a strategy object (as the name it stands for)."""
    if name == "Trainer":
        return Instance(None, {"_kind": "trainer", "_kwargs": dict(kwargs), "_line": at})
    if name == "DeepSpeedStrategy":  # its first parameter is the accelerator, not the stage
        return f"deepspeed_stage_{kwargs.get('stage', 2)}"
    return STRATEGIES.get(name, UNKNOWN)


def trainer_method(api: Any, trainer: Instance, name: str, args: list, kwargs: dict,
                   node: Node) -> Any:
    if name != "fit":
        return None  # validate, test, predict: no training step
    model = args[0] if args else kwargs.get("model")
    if not isinstance(model, Module) or model.cls is None:
        return None
    data = args[1] if len(args) > 1 else kwargs.get("train_dataloaders", kwargs.get("datamodule"))
    _fit(api, trainer.attrs, model, data, node)
    return None


def module_method(api: Any, module: Module, name: str, args: list, at: int) -> Any:
    optimizers = module.attrs.get(_OPTIMIZERS_OF, [])
    if name == "optimizers":
        return optimizers[0] if len(optimizers) == 1 else list(optimizers)
    api.facts.on_backward(api, at)  # manual_backward(loss)
    return None


def _fit(api: Any, trainer: dict, model: Module, data: Any, node: Node) -> None:
    facts, interp, tape = api.facts, api.interp, api.tape
    settings, at = trainer["_kwargs"], trainer["_line"]
    # Lightning's order: setup("fit") (the datamodule's, then the model's),
    # configure_model(), configure_optimizers(), then the train dataloader.
    datamodule = data if isinstance(data, Instance) else None
    for hooked in (datamodule, model):
        _call(api, hooked, "setup", ["fit"])
    _call(api, model, "configure_model")
    _configure(facts, settings, model, at)
    optimizers = _optimizers(_call(api, model, "configure_optimizers"))
    model.attrs[_OPTIMIZERS_OF] = optimizers
    loader = data if isinstance(data, Loader) else _call(api, datamodule or model, "train_dataloader")
    batch = api.iterate(loader, node, True)[0] if isinstance(loader, Loader) else Unknown("batch")
    mixed = _MIXED.get(str(settings.get("precision", "32")))
    # What Lightning's loop holds through backward: the batch and the step's output.
    held = Scope(interp.scopes[-1])
    held.set("batch", batch)
    interp.scopes.append(held)
    saved = tape.autocast
    try:
        with interp.training_loop(node, held):
            if mixed:
                tape.autocast, tape.cast_cache = facts.autocast_dtype(mixed, at), {}
            held.set("output", _call(api, model, "training_step", [batch, 0]))
            facts.on_holder(model, interp.loop_stack)
            if model.attrs.get("automatic_optimization") is not False:
                _optimize(api, optimizers, at)
    finally:
        tape.autocast = saved
        interp.scopes.pop()


def _optimize(api: Any, optimizers: list[Optimizer], at: int) -> None:
    """Lightning's automatic optimization: zero_grad (to None), backward, every step."""
    api.facts.on_zero_grad(True, at)
    api.facts.on_backward(api, at)
    for opt in optimizers:
        api.facts.on_step(at)
        opt.loops.update(api.interp.loop_stack)


def _configure(facts: Any, settings: dict, model: Module, at: int) -> None:
    """What the Trainer's arguments say: precision, accumulation, strategy."""
    precision = str(settings.get("precision", "32"))
    if precision in ("16-mixed", "16"):
        facts.scaler_line = at
    if precision in _TRUE:
        facts.on_param_dtype(model, _TRUE[precision], at)
    accumulate = settings.get("accumulate_grad_batches")
    if isinstance(accumulate, int) and accumulate > 1:
        facts.accumulation, facts.accumulation_line = accumulate, at
    _strategy(facts, settings, at)


def _strategy(facts: Any, settings: dict, at: int) -> None:
    """How the Trainer spreads training: devices x num_nodes processes (FSDP's world
    size), by its `strategy` (DDP where it is left to Lightning and there are several)."""
    devices, nodes = settings.get("devices"), settings.get("num_nodes", 1)
    if isinstance(devices, (list, tuple)):
        devices = len(devices)
    world = devices * nodes if isinstance(devices, int) and isinstance(nodes, int) else 1
    if world > 1:
        facts.named.setdefault("world_size", (world, at))
    strategy = settings.get("strategy", "auto")
    if strategy == "auto" and world > 1:
        strategy = "ddp"
    if not isinstance(strategy, str):
        return
    if strategy.startswith("deepspeed"):
        # Stage 3 shards the parameters as FSDP does; stages 1 and 2 shard only the
        # optimizer state and gradients, which the estimate does not model: counted as DDP.
        facts.on_sharding("fsdp" if "stage_3" in strategy else "ddp", at)
        if "stage_3" not in strategy:
            facts.assume(f"{strategy} counted as DDP (its sharded optimizer state is not modelled)")
    elif strategy.startswith(("fsdp", "ddp")):
        facts.on_sharding("fsdp" if strategy.startswith("fsdp") else "ddp", at)


def _call(api: Any, obj: Any, name: str, args: list | None = None) -> Any:
    """obj.name(*args) where the script's class defines it; Unknown where it does not."""
    if not isinstance(obj, (Module, Instance)) or obj.cls is None or name not in obj.cls.methods:
        return Unknown(name)
    return api.interp.call_function(api.method(obj, name), list(args or []), {})


def _optimizers(configured: Any) -> list[Optimizer]:
    """The optimizers in what configure_optimizers() returned: one, a list, `([opts],
    [schedulers])`, a dict with "optimizer", or a list of such dicts."""
    if isinstance(configured, Optimizer):
        return [configured]
    if isinstance(configured, dict):
        return _optimizers(configured.get("optimizer"))
    if isinstance(configured, (list, tuple)):
        return [opt for item in configured for opt in _optimizers(item)]
    return []
