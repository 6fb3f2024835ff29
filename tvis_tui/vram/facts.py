"""What the reader learns about a training setup while it follows the script, and the
settings (command-line overrides and what-ifs) it applies on the way."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from tree_sitter import Node

from tvis_tui.vram.source import contains_call, named, read_tree, text, walk
from tvis_tui.vram.values import (UNKNOWN, Instance, Loader, Module, Optimizer, Param,
                                  Required, Tensor, Unknown)

BATCH_NAMES = re.compile(r"^(micro_?)?(train_)?batch(_?size)?$|^bs$|^per_device_train_batch_size$"
                         r"|^batch_size_per_(gpu|device)$", re.IGNORECASE)
SEQ_NAMES = re.compile(r"^(max_)?(seq|sequence)_?len(gth)?$|^block_size$|^context(_?(length|len|size))?$"
                       r"|^max_len(gth)?$|^n_ctx$|^ctx_len$|^bptt$|^max_position$", re.IGNORECASE)
WORLD_NAMES = re.compile(r"^(world_size|n_?gpus|num_gpus|nprocs|ngpu|num_devices)$", re.IGNORECASE)
IMAGE_NAMES = re.compile(r"^(img|image)_?(size|res)$|^resolution$|^input_size$", re.IGNORECASE)

DEFAULT_BATCH = 32
"""Batch size assumed when the script names none: a common default, never 1."""
DEFAULT_SEQ = 512
DEFAULT_IMAGE = 224


@dataclass
class Settings:
    """Overrides from the command line and the what-ifs suggestions try."""

    batch_size: int | None = None
    seq_len: int | None = None
    dtype: str | None = None
    optimizer: str | None = None
    params: int | None = None
    checkpoint: bool = False
    fused_attention: bool = False
    set_to_none: bool | None = None
    shards: int = 1
    freeze_embeddings: bool = False
    accumulation: int | None = None
    device: str = "cuda"
    bf16: bool | None = None
    """Whether the GPU checked against computes in bfloat16 (a T4 does not): what the
    script's `torch.cuda.is_bf16_supported()` returns; None where no GPU is named."""
    script_args: tuple[str, ...] = ()
    """The script's command line (vram's --script-args): what its parse_args() returns."""


@dataclass
class Facts:
    settings: Settings
    path: Path
    models: list[Module] = field(default_factory=list)
    model: Module | None = None
    model_line: int = 0
    called: list[tuple[Module, set[int]]] = field(default_factory=list)
    """Models called at the top level of training loops, with the loops' entries (see
    `called_models`)."""
    inputs: list[Tensor] = field(default_factory=list)
    forward_line: int = 0
    input_assumed: bool = False
    """The model's input was made up (synthetic_input), not read: it is listed as assumed."""
    optimizers: list[Optimizer] = field(default_factory=list)
    wrapped: set[int] = field(default_factory=set)
    """Models a DDP/FSDP/DataParallel wrapper holds (by id): their `.module` is themselves."""
    loaders: list[Loader] = field(default_factory=list)
    """The DataLoaders the script made, in order (a training one usually first)."""
    autocast: str | None = None
    autocast_line: int = 0
    param_dtype: str | None = None
    param_dtype_line: int = 0
    scaler_line: int = 0
    compile_line: int = 0
    checkpoint_line: int = 0
    sharding: str | None = None
    sharding_line: int = 0
    set_to_none: bool = True
    zero_grad_line: int = 0
    accumulation: int = 1
    accumulation_line: int = 0
    loop_line: int = 0
    backward_line: int = 0
    step_line: int = 0
    snapshot: Any = None
    held: list[Tensor] = field(default_factory=list)
    named: dict[str, tuple[Any, int]] = field(default_factory=dict)
    assumed: list[str] = field(default_factory=list)
    no_model: str | None = None
    """Why no model was found, when none was: the estimate then rests on --params alone."""
    tied: bool = False
    repeated: set[int] = field(default_factory=set)
    _tape: Any = None
    _siblings: dict[str, Any] = field(default_factory=dict)

    # names that carry sizes ---------------------------------------------------------------
    def override(self, name: str, value: Any) -> Any:
        """`value` assigned to `name`, replaced by a command-line override when the name is
        a batch size or sequence length; remembered so the breakdown can say where it came from."""
        s = self.settings
        if not isinstance(value, (int, Unknown)) or isinstance(value, bool):
            return value  # a tensor named `context` (attention's output) is no size
        if BATCH_NAMES.match(name):
            value = s.batch_size if s.batch_size is not None else value
        elif SEQ_NAMES.match(name):
            value = s.seq_len if s.seq_len is not None else value
        if isinstance(value, int) and not isinstance(value, bool):
            self.named[name.lower()] = (value, 0)  # the latest assignment wins
        return value

    def named_value(self, pattern: re.Pattern) -> int | None:
        for name, (value, _) in self.named.items():
            if pattern.match(name) and isinstance(value, int) and value > 0:
                return value
        return None

    def guess_batch_size(self) -> int:
        found = self.settings.batch_size or self.named_value(BATCH_NAMES)
        if found:
            return found
        self.assume(f"batch size {DEFAULT_BATCH} (no batch size found in the script)")
        return DEFAULT_BATCH

    def batch_hint(self, batch: int) -> Any:
        return Unknown(f"batch of {batch}")

    def assume(self, what: str) -> None:
        if what not in self.assumed:
            self.assumed.append(what)

    # model ----------------------------------------------------------------------------
    def on_layer(self, module: Module) -> Module:
        if module.config.get("unsized"):
            self.assume(f"size of {module.kind} at line {module.line} not readable"
                        f"{required_hint(module.config.values())}; "
                        "its parameters and outputs are not counted")
        if self.settings.dtype in ("float16", "bfloat16"):
            for p in module.params():
                if p.dtype.startswith(("float", "bfloat")):  # as .half() does: counters stay int64
                    p.dtype = self.settings.dtype
        return module

    def on_model(self, module: Module, node: Node) -> None:
        self.on_layer(module)
        self.models.append(module)

    def owner_of(self, params: tuple[Param, ...]) -> Module | None:
        ids = {id(p) for p in params}
        for module in reversed(self.models):
            if ids and ids <= {id(p) for p in module.params()}:
                return module
        return self.model or (self.models[-1] if self.models else None)

    @staticmethod
    def optimized(params: Any) -> tuple[Param, ...]:
        """The parameters an optimizer's first argument names: a list of them, or of param
        groups (dicts with "params"); () where it could not be read."""
        def listed(value: Any) -> list:
            return [value] if isinstance(value, Param) else list(value) if isinstance(value, (list, tuple)) else []

        found = [p for item in listed(params)
                 for p in (listed(item.get("params")) if isinstance(item, dict) else [item])]
        return tuple({id(p): p for p in found if isinstance(p, Param)}.values())

    def on_param_dtype(self, module: Module, dtype: str, at: int) -> None:
        if self.settings.dtype and self.settings.dtype != dtype:
            return
        for p in module.params():
            if p.dtype.startswith(("float", "bfloat")):
                p.dtype = dtype
        self.param_dtype, self.param_dtype_line = dtype, at

    def should_checkpoint(self, module: Module) -> bool:
        return self.settings.checkpoint and id(module) in self.repeated

    def on_forward(self, module: Module, args: list, at: int, loops: Sequence[int] = ()) -> list:
        """The first top-level model call with gradients on is the training forward;
        `loops`: the entries of the training loops the call is in."""
        tape = self._tape
        self._note_called(module, loops)
        if self.model is not None or not module.params() or not tape.grad_enabled:
            return args
        self.model, self.forward_line = module, at
        self.model_line = module.line
        self._mark_repeated(module)
        if not args or not isinstance(args[0], Tensor):
            made, source = loader_input(self) or (synthetic_input(self, module), None)
            self.input_assumed = True
            how = (f"the first field of a batch of the DataLoader at line {source.line}" if source
                   else "sized from the first layer and the script's named sizes")
            self.assume(f"model input {'x'.join(map(str, made.shape))} {made.dtype}, {how} "
                        "(the batch itself could not be followed)")
            args = [made] + list(args[1:])
        self.inputs = [a for a in args if isinstance(a, Tensor)]
        if self.settings.dtype and self.settings.dtype.startswith("amp-") and tape.autocast is None:
            tape.autocast = self.autocast_dtype(self.settings.dtype[4:], None)
        return args

    def on_holder(self, holder: Module, loops: Sequence[int]) -> None:
        """`holder`'s step ran in `loops` (a LightningModule's training_step): all of it
        is resident, the parts it never calls or trains (a frozen teacher) included; it
        trains only what the model and the optimizers hold."""
        self._note_called(holder, loops)

    def _note_called(self, module: Module, loops: Sequence[int]) -> None:
        if not loops or not module.params():
            return
        seen = next((entries for m, entries in self.called if m is module), None)
        if seen is None:
            self.called.append((module, set(loops)))
        else:
            seen.update(loops)

    def _mark_repeated(self, model: Module) -> None:
        for module in model.walk():
            items = module.attrs.get("_list") or []
            kinds = [m.kind for m in items if isinstance(m, Module)]
            if len(kinds) >= 2 and len(set(kinds)) == 1 and items[0].params():
                self.repeated.update(id(m) for m in items)

    def autocast_dtype(self, dtype: str | None, at: int | None) -> str:
        forced = self.settings.dtype
        if forced and forced.startswith("amp-"):
            dtype = {"amp-bf16": "bfloat16", "amp-fp16": "float16"}.get(forced, dtype)
        dtype = dtype or "float16"
        if at and not self.autocast_line:
            self.autocast_line = at
        self.autocast = dtype
        return dtype

    # training step ------------------------------------------------------------------------
    def on_optimizer(self, opt: Optimizer) -> Optimizer:
        self.optimizers.append(opt)
        return opt

    def trained_optimizers(self) -> list[Optimizer]:
        """The optimizers that train beside the model's own (the first over its
        parameters): those whose `step()` ran in a training loop its step ran in (a GAN's
        two). One that stepped only in a loop of its own (a model trained before, then
        replaced) holds nothing by then. All of them where the own one's step was not read."""
        main = self._main_optimizer()
        if main is None:
            return []
        if not main.loops:
            return list(self.optimizers)
        return [o for o in self.optimizers if o is main or o.loops & main.loops]

    def called_models(self) -> list[Module]:
        """The models called at the top of the loop the model trains in (a frozen encoder
        under no_grad; a LightningModule, `on_holder`): resident through its step, trained
        or not. Not one called only in a loop of its own (trained before, then replaced)."""
        main = self._main_optimizer()
        loops = main.loops if main is not None else set()
        return [m for m, seen in self.called if not loops or seen & loops]

    def _main_optimizer(self) -> Optimizer | None:
        """The optimizer over the model's parameters; the first where none is."""
        if not self.optimizers:
            return None
        own = {id(p) for p in self.model.params()} if self.model is not None else set()
        return next((o for o in self.optimizers if own & {id(p) for p in o.params}), self.optimizers[0])

    def on_sharding(self, kind: str, at: int) -> None:
        self.sharding, self.sharding_line = kind, at

    def on_zero_grad(self, set_to_none: Any, at: int) -> None:
        self.zero_grad_line = at
        self.set_to_none = set_to_none is not False

    def on_step(self, at: int) -> None:
        self.step_line = self.step_line or at

    def on_backward(self, api: Any, at: int) -> None:
        if self.snapshot is not None:
            return
        self.backward_line = at
        self.snapshot = list(api.tape.ops)
        self.held = held_tensors(api.interp.scopes, self.settings.device == "cpu")

    def note_training_loop(self, node: Node, scope: Any, interp: Any) -> None:
        self.loop_line = self.loop_line or interp.at(node)
        body = node.child_by_field_name("body")
        if node.type == "for_statement" and not contains_call(body, {"step"}):
            # `for micro_step in range(N): ... loss.backward()` with the step outside.
            steps = interp.eval(node.child_by_field_name("right"), scope)
            if isinstance(steps, range) and len(steps) > 1:
                self.accumulation, self.accumulation_line = len(steps), interp.at(node)
                return
        for cond in (n.child_by_field_name("condition") for n in walk(node) if n.type == "if_statement"):
            block = cond.parent.child_by_field_name("consequence") if cond else None
            # The step every N iterations, the backward every one; a block with a backward
            # of its own is another model's update (a GAN generator's every n_critic).
            if block is None or not contains_call(block, {"step"}) or contains_call(block, {"backward"}):
                continue
            for mod in (n for n in walk(cond) if n.type == "binary_operator" and text(
                    n.child_by_field_name("operator")) == "%"):
                value = interp.eval(mod.child_by_field_name("right"), scope)
                if isinstance(value, int) and value > 1:
                    self.accumulation, self.accumulation_line = value, interp.at(mod)
                    return

    def has_sibling(self, module: str) -> bool:
        return self._sibling_path(module).is_file()

    def _sibling_path(self, module: str) -> Path:
        return self.path.parent / (module.lstrip(".").replace(".", "/") + ".py")

    def sibling(self, module: str, name: str, api: Any) -> Any:
        """`from model import GPT` or `from .model import GPT` next to the script: read
        that file's definitions and take `name` from it (each file once)."""
        key = module.lstrip(".")
        if key not in self._siblings:
            self._siblings[key] = None  # a file importing itself back reads as unknown
            tree = read_tree(self._sibling_path(module)) if key else None
            self._siblings[key] = self._read_sibling(tree, api, key) if tree is not None else None
        scope = self._siblings[key]
        if scope is None:
            return Unknown(f"{module}.{name}")
        return scope.vars.get(name, UNKNOWN)

    def _read_sibling(self, tree: Any, api: Any, key: str) -> Any:
        from tvis_tui.vram.interp import Scope

        scope = Scope(api.globals.parent, file=key)
        for stmt in named(tree.root_node):
            if stmt.type in ("class_definition", "function_definition", "decorated_definition",
                             "import_statement", "import_from_statement", "expression_statement"):
                api.interp.exec_stmt(stmt, scope)
        return scope


def required_hint(values: Iterable[Any]) -> str:
    """` (give --dim, which the script requires, with --script-args)` where one of `values`
    is an argument the script requires that was not given; "" otherwise."""
    required = next((v.why for v in values if isinstance(v, Required)), None)
    return f" (give {required}, which the script requires, with --script-args)" if required else ""


def held_tensors(scopes: list, host_data: bool) -> list[Tensor]:
    """Tensors that variables of the running functions still reference; with `host_data`
    (an estimate for a CPU run) also the tensors a dataset holds, which on a GPU stay in
    host memory."""
    out: dict[int, Tensor] = {}

    def add(value: Any, depth: int = 0) -> None:
        if isinstance(value, Tensor):
            out.setdefault(id(value.root), value.root)
        elif depth < 2 and isinstance(value, (list, tuple)):
            for item in value[:64]:
                add(item, depth + 1)
        elif depth < 2 and isinstance(value, Instance) and value.cls is None:
            for item in value.attrs.values():
                add(item, depth + 1)
        elif host_data and isinstance(value, Loader):
            for item in value.tensors:
                add(item, depth + 1)

    for scope in scopes:
        for value in scope.vars.values():
            add(value)
    return list(out.values())


def first_layer(module: Module) -> Module | None:
    """The first built-in layer with parameters, in definition order."""
    for value in module.attrs.values():
        items = value if isinstance(value, list) else [value]
        for item in items:
            if isinstance(item, Module):
                if item.cls is None and item.attrs and any(
                        isinstance(v, Param) for v in item.attrs.values()):
                    return item
                found = first_layer(item)
                if found is not None:
                    return found
    return None


def _weight_dtype(layer: Module | None) -> str:
    """The dtype a layer takes its input in: its weight's (a `.half()` model is fed half)."""
    weight = layer.attrs.get("weight") if layer is not None else None
    return weight.dtype if isinstance(weight, Param) else "float32"


def loader_input(facts: Facts) -> tuple[Tensor, Loader] | None:
    """What the first field of a batch of the script's first DataLoader whose samples are
    known looks like (a torchvision MNIST's 1x28x28 images), and that loader; None where
    no loader's are."""
    for loader in facts.loaders:
        sample = loader.sample
        first = sample[0] if isinstance(sample, (tuple, list)) and sample else sample
        batch = facts.settings.batch_size or loader.batch_size
        if isinstance(first, Tensor) and isinstance(batch, int) and not isinstance(batch, bool):
            return Tensor((batch,) + first.shape, first.dtype), loader
    return None


def synthetic_input(facts: Facts, model: Module) -> Tensor:
    """An input the model's first layer accepts, sized from what the script names."""
    batch = facts.guess_batch_size()
    layer = first_layer(model)
    kind = layer.kind if layer is not None else model.kind
    config = layer.config if layer is not None else model.config
    seq = facts.settings.seq_len or facts.named_value(SEQ_NAMES)
    image = facts.named_value(IMAGE_NAMES) or DEFAULT_IMAGE
    if kind == "Embedding" or model.config.get("family") == "language":
        if not seq:
            seq = DEFAULT_SEQ
            facts.assume(f"sequence length {DEFAULT_SEQ}")
        return Tensor((batch, seq), "int64")
    if kind.startswith("Conv"):
        dims = int(kind[-2]) if kind[-2].isdigit() else 2
        facts.assume(f"input size {image} per spatial side")
        return Tensor((batch, config.get("in_channels", 3)) + (image,) * dims, _weight_dtype(layer))
    if kind in ("LSTM", "GRU", "RNN"):
        seq = seq or 128
        facts.assume(f"sequence length {seq}")
        return Tensor((batch, seq, config.get("input_size", 1)) if config.get("batch_first")
                      else (seq, batch, config.get("input_size", 1)))
    if kind == "Linear":
        return Tensor((batch, config.get("in_features", 1)), _weight_dtype(layer))
    if kind == "MultiheadAttention":
        seq = seq or DEFAULT_SEQ
        facts.assume(f"sequence length {seq}")
        width = config.get("embed_dim", 1)
        return Tensor((batch, seq, width) if config.get("batch_first") else (seq, batch, width))
    facts.assume(f"input of {image}x{image} RGB images")
    return Tensor((batch, 3, image, image))
