"""Names from torch and the libraries around it: what calling them does to the reader's state."""

from __future__ import annotations

import argparse
import math
from typing import Any, NoReturn

from tree_sitter import Node

from tvis_tui.vram import known_models, layers, lightning
from tvis_tui.vram.losses import LOSSES
from tvis_tui.vram.facts import required_hint
from tvis_tui.vram.functional import functional_call
from tvis_tui.vram.values import (ITEMSIZE, UNKNOWN, Context, DType, Instance, Loader, Module,
                                  Function, Native, Optimizer, Param, Ref, Required, Tensor, Unknown)

_ALIASES = {"torch.float": "float32", "torch.half": "float16", "torch.double": "float64",
            "torch.long": "int64", "torch.int": "int32"}
_OPTIMIZERS = {"SGD", "Adam", "AdamW", "Adagrad", "RMSprop", "Adafactor", "Adam8bit",
               "AdamW8bit", "PagedAdamW8bit", "Lion", "Adadelta", "NAdam", "RAdam", "Adamax",
               "LAMB", "SparseAdam", "PagedAdamW", "Lion8bit", "SGD8bit", "LBFGS"}
_CONTAINERS = {"Sequential", "ModuleList", "ModuleDict"}
_PLAIN_LAYERS = {"TransformerEncoderLayer", "Dropout", "Identity", "Flatten"}
_PARALLEL = {"DistributedDataParallel": "ddp", "DDP": "ddp", "FullyShardedDataParallel": "fsdp",
             "FSDP": "fsdp", "fully_shard": "fsdp"}
_DATASETS = {"MNIST": (1, 28, 28), "FashionMNIST": (1, 28, 28), "CIFAR10": (3, 32, 32),
             "CIFAR100": (3, 32, 32), "SVHN": (3, 32, 32), "STL10": (3, 96, 96)}


def ref(path: str) -> Ref:
    return Ref(path)


def attribute(obj: Ref, name: str) -> Any:
    path = f"{obj.path}.{name}"
    if obj.path == "torch" and (name in ITEMSIZE or path in _ALIASES):
        return DType(_ALIASES.get(path, name))
    if obj.path == "math":
        return getattr(math, name, UNKNOWN)
    return Ref(path)


_NOT_MINE = object()


def call(api: Any, path: str, args: list, kwargs: dict, node: Node) -> Any:
    """Dispatch a call to a library name by the last parts of its dotted path."""
    parts = path.split(".")
    at = api.at(node)
    if parts[0] in lightning.PACKAGES:
        return lightning.call(api, parts[-1], args, kwargs, at)
    for handler in (_modules, _training, _data, _python):
        value = handler(api, parts, args, kwargs, at)
        if value is not _NOT_MINE:
            return value
    model = known_models.build(path, args, kwargs, at)
    if model is not None:
        return api.facts.on_layer(model)
    if parts[0] == "torch":
        return functional_call(api, parts[-1], args, kwargs, at)
    return Unknown(path)


def _modules(api: Any, parts: list[str], args: list, kwargs: dict, at: int) -> Any:
    name = parts[-1]
    if name in _CONTAINERS:
        return _container(name, args, at)
    if name in LOSSES:
        return Module(name, config=dict(kwargs), line=at)
    if (name in layers.SIGNATURES or name in layers.ACTIVATIONS or name in _PLAIN_LAYERS) and (
            "nn" in parts or parts[0] != "torch"):
        return api.facts.on_layer(layers.build(name, args, kwargs, at))
    if name == "Parameter":
        t = args[0] if args else kwargs.get("data")
        sized = isinstance(t, Tensor) and all(type(d) is int for d in t.shape)
        if not sized:  # counted as nothing: the estimate must not read as if it were followed
            sizes = [t] if isinstance(t, Required) else getattr(t, "shape", ())
            api.facts.assume(f"size of the nn.Parameter at line {at} not readable"
                             f"{required_hint(sizes)}; it is not counted")
        return Param(t.shape, t.dtype) if isinstance(t, Tensor) else UNKNOWN
    return _NOT_MINE


def _training(api: Any, parts: list[str], args: list, kwargs: dict, at: int) -> Any:
    """Optimizers, precision, gradient modes, compilation, data parallelism, checkpointing."""
    name, facts = parts[-1], api.facts
    if name in _OPTIMIZERS:
        params = facts.optimized(args[0] if args else kwargs.get("params"))
        return facts.on_optimizer(Optimizer(name, facts.owner_of(params), kwargs, at, params))
    if name == "autocast":
        dtype = kwargs.get("dtype")
        return Context("autocast", dtype.name if isinstance(dtype, DType) else (
            "float16" if "cuda" in parts else None), kwargs.get("enabled", True) is not False)
    if name in ("no_grad", "inference_mode", "enable_grad"):
        return Context("enable_grad" if name == "enable_grad" else "no_grad")
    if name == "GradScaler":
        facts.scaler_line = at
        return Instance(None, {"_kind": "scaler"})
    if name == "compile":
        facts.compile_line = at
        return args[0] if args else UNKNOWN
    if name in _PARALLEL:
        facts.on_sharding(_PARALLEL[name], at)
        return _wrapped_model(facts, args, kwargs)
    if name == "DataParallel":
        facts.assume(_data_parallel(at))
        return _wrapped_model(facts, args, kwargs)
    if name == "data_parallel" and "parallel" in parts:  # nn.parallel.data_parallel(model, x, ids)
        facts.assume(_data_parallel(at))
        module, inputs = (list(args) + [kwargs.get("module", UNKNOWN), kwargs.get("inputs", UNKNOWN)])[:2]
        return api.call_module(module, list(inputs) if isinstance(inputs, tuple) else [inputs], {}, at)
    if name in ("checkpoint", "checkpoint_sequential") and "checkpoint" in parts[:-1]:
        facts.checkpoint_line = facts.checkpoint_line or at
        return checkpoint(api, args[0] if args else UNKNOWN, args[1:], kwargs, at)
    return _NOT_MINE


def _wrapped_model(facts: Any, args: list, kwargs: dict) -> Any:
    """The model a DDP/FSDP/DataParallel wrapper holds, standing for the wrapper (its
    `.module` is the model itself)."""
    model = args[0] if args else kwargs.get("module", UNKNOWN)
    if isinstance(model, Module):
        facts.wrapped.add(id(model))
    return model


def _data_parallel(at: int) -> str:
    return (f"DataParallel at line {at}: counted as one GPU running the whole batch; on N GPUs "
            "each replica keeps about 1/N of these activations, GPU 0 the gathered outputs too")


def _data(api: Any, parts: list[str], args: list, kwargs: dict, at: int) -> Any:
    name = parts[-1]
    if name == "DataLoader":
        dataset = args[0] if args else kwargs.get("dataset")
        batch = api.facts.override("batch_size", kwargs.get(
            "batch_size", args[1] if len(args) > 1 else 1))
        if isinstance(dataset, Instance):
            loader = Loader(batch, _first_item(api, dataset), at)
        elif isinstance(dataset, Loader):
            loader = Loader(batch, dataset.sample, at, dataset.tensors)
        else:
            loader = Loader(batch, UNKNOWN, at)
        api.facts.loaders.append(loader)
        return loader
    if name in ("random_split", "Subset"):  # parts of a dataset: items shaped as its own
        dataset = args[0] if args else kwargs.get("dataset")
        if isinstance(dataset, Instance):
            dataset = Loader(None, _first_item(api, dataset), at)
        if not isinstance(dataset, Loader):
            return UNKNOWN
        if name == "Subset":
            return dataset
        lengths = args[1] if len(args) > 1 else kwargs.get("lengths")
        return [dataset] * (len(lengths) if isinstance(lengths, (list, tuple)) else 2)
    if name == "TensorDataset":
        tensors = tuple(t for t in args if isinstance(t, Tensor))
        return Loader(None, tuple(Tensor(t.shape[1:], t.dtype) if isinstance(t, Tensor)
                                  else UNKNOWN for t in args), at, tensors)
    if name in _DATASETS:
        return Loader(None, (Tensor(_DATASETS[name]), Tensor((), "int64")), at)
    return _NOT_MINE


def _first_item(api: Any, dataset: Instance) -> Any:
    """A script's own Dataset's item 0, read by following its `__getitem__` (tensors made
    there are data, not part of the training step: they stay off the tape)."""
    if dataset.cls is None or "__getitem__" not in dataset.cls.methods:
        return UNKNOWN
    tape = api.tape
    outer = tape.ops
    tape.ops = []
    try:
        item = api.interp.call_function(api.method(dataset, "__getitem__"), [0], {})
    finally:
        tape.ops = outer
    if isinstance(item, list):
        return tuple(item)
    return item if isinstance(item, (Tensor, tuple, dict)) else UNKNOWN


def _python(api: Any, parts: list[str], args: list, kwargs: dict, at: int) -> Any:
    """argparse, namespaces, dataclasses, torch.device, the GPU's abilities and functools.partial."""
    name = parts[-1]
    if name == "ArgumentParser":
        return Instance(None, {"_kind": "argparse", "_dests": {}, "_specs": []})
    if name in ("SimpleNamespace", "Namespace", "EasyDict"):
        if kwargs:
            return Instance(None, dict(kwargs))
        return Instance(None, dict(args[0]) if args and isinstance(args[0], dict) else {})
    if name == "dataclass":
        return Native("dataclass", _identity)
    if name == "field":
        return kwargs.get("default", UNKNOWN)
    if name == "device":
        return args[0] if args else "cuda"
    if parts[:2] == ["torch", "cuda"] and name in ("is_available", "is_bf16_supported"):
        # The GPU checked against answers: `'bfloat16' if is_bf16_supported() else 'float16'`
        settings = api.facts.settings
        known = settings.device == "cuda" if name == "is_available" else settings.bf16
        return UNKNOWN if known is None else known
    if name == "partial" and parts[0] == "functools" and args:
        return _partial(args[0], args[1:], kwargs)
    if name == "chain" and parts[0] == "itertools":
        return [x for a in args for x in a] if all(isinstance(a, (list, tuple)) for a in args) else UNKNOWN
    if name == "prod" and parts[0] in ("numpy", "np") and len(args) == 1:
        return _prod(args[0])  # `Linear(1024, int(np.prod(img_shape)))`, a GAN's image size
    return _NOT_MINE


def _prod(values: Any) -> Any:
    if isinstance(values, (list, tuple)) and all(type(v) is int for v in values):
        return math.prod(values)
    return Unknown("numpy.prod")


def _partial(fn: Any, bound: list, bound_kwargs: dict) -> Native:
    """`partial(torch.optim.AdamW, lr=...)`: a call of it is a call of `fn` at the place of
    that call, with the bound arguments first."""
    def call(api: Any, native: Native, args: list, kwargs: dict, node: Node) -> Any:
        return api.call(fn, [*bound, *args], {**bound_kwargs, **kwargs}, node)
    return Native("partial", call)


def _identity(api: Any, native: Native, args: list, kwargs: dict, node: Node) -> Any:
    return args[0] if args else UNKNOWN


def _container(kind: str, args: list, at: int) -> Module:
    items: Any = list(args)
    if kind == "ModuleList":
        items = list(args[0]) if args and isinstance(args[0], (list, tuple)) else []
    if kind == "ModuleDict" or (len(args) == 1 and isinstance(args[0], dict)):
        mapping = args[0] if args and isinstance(args[0], dict) else {}
        return Module(kind, {str(k): v for k, v in mapping.items()}, line=at)
    if kind == "Sequential" and len(args) == 1 and isinstance(args[0], (list, tuple)):
        items = list(args[0])
    return Module(kind, {"_list": [m for m in items if isinstance(m, Module)]}, line=at)


_CASTS = {"half": "float16", "bfloat16": "bfloat16", "float": "float32", "double": "float64"}


def _cast_target(name: str, args: list, kwargs: dict) -> str | None:
    """The dtype `module.half()` / `.to(torch.bfloat16)` converts parameters to, if any."""
    if name in _CASTS:
        return _CASTS[name]
    if name == "to":
        return next((a.name for a in list(args) + list(kwargs.values()) if isinstance(a, DType)), None)
    return None


def module_method(api: Any, native: Native, args: list, kwargs: dict, node: Node) -> Any:
    module: Module = native.self_value
    name = native.name
    dtype = _cast_target(name, args, kwargs)
    if dtype is not None:
        api.facts.on_param_dtype(module, dtype, api.at(node))
        return module
    if name in ("parameters", "named_parameters"):
        params = [p for p in module.params() if not p.buffer]
        return params if name == "parameters" else [(str(i), p) for i, p in enumerate(params)]
    if name in ("modules", "children"):
        return module.walk() if name == "modules" else module.children()
    if name == "requires_grad_" and args and args[0] is False:
        for p in module.params():
            p.trainable = False
        return module
    if name == "zero_grad":
        api.facts.on_zero_grad(kwargs.get("set_to_none", True), api.at(node))
        return None
    if name in lightning.MODULE_METHODS:
        return lightning.module_method(api, module, name, args, api.at(node))
    if name in ("gradient_checkpointing_enable",):
        api.facts.checkpoint_line = api.at(node)
        return None
    if name in ("add_module", "register_module") and len(args) == 2:
        module.attrs[str(args[0])] = args[1]
        return None
    if name in ("register_buffer", "register_parameter") and len(args) >= 2:
        value = args[1]
        if isinstance(value, Tensor):
            value = Param(value.shape, value.dtype, buffer=name == "register_buffer")
        module.attrs[str(args[0])] = value
        return None
    if name == "forward":
        return api.call_module(module, args, kwargs, api.at(node))
    if name == "append" and "_list" in module.attrs:
        module.attrs["_list"].append(args[0])
        return None
    return module if name in ("to", "cuda", "train", "eval", "cpu", "apply", "share_memory") else (
        Unknown(f"module.{name}"))


def object_method(api: Any, native: Native, args: list, kwargs: dict, node: Node) -> Any:
    obj, name = native.self_value, native.name
    if isinstance(obj, Optimizer):
        if name == "step":
            closure = args[0] if args else kwargs.get("closure")
            if isinstance(closure, Function):  # LBFGS-style: forward and backward run inside step()
                api.interp.call_function(closure, [], {})
            api.facts.on_step(api.at(node))
            obj.loops.update(api.interp.loop_stack)
        elif name == "add_param_group":
            added = api.facts.optimized([args[0]] if args else [])
            # Unread, the optimizer's parameters are unread: it is taken to step the model.
            obj.params = obj.params + added if added else ()
        elif name == "zero_grad":
            api.facts.on_zero_grad(kwargs.get("set_to_none", True), api.at(node))
        return None
    if isinstance(obj, Param):
        return {"numel": obj.numel, "dim": len(obj.shape), "size": obj.shape}.get(name)
    if isinstance(obj, Instance):
        return _instance_method(api, obj, name, args, kwargs, node)
    return Unknown(name)


def _instance_method(api: Any, obj: Instance, name: str, args: list, kwargs: dict,
                     node: Node) -> Any:
    kind = obj.attrs.get("_kind")
    if kind == "argparse":
        dests = obj.attrs["_dests"]
        if name == "add_argument":
            _add_argument(api, dests, args, kwargs)
            obj.attrs["_specs"].append((args, kwargs))
        elif name in ("parse_args", "parse_known_args"):
            given = {} if args else _given_arguments(api, obj.attrs["_specs"],
                                                     api.facts.settings.script_args)
            ns = Instance(None, {**dests, **{k: api.facts.override(k, v) for k, v in given.items()}})
            return (ns, []) if name == "parse_known_args" else ns
        elif name in ("add_argument_group", "add_mutually_exclusive_group"):
            return obj
        return None
    if kind == "trainer":
        return lightning.trainer_method(api, obj, name, args, kwargs, node)
    if kind == "scaler":
        if name == "scale":
            return args[0] if args else UNKNOWN
        if name == "step" and args and isinstance(args[0], Optimizer):
            api.facts.on_step(api.at(node))
            args[0].loops.update(api.interp.loop_stack)
        return None
    return Unknown(name)


def _add_argument(api: Any, dests: dict, args: list, kwargs: dict) -> None:
    flags = [a for a in args if isinstance(a, str)]
    long = next((f for f in flags if f.startswith("--")), flags[0] if flags else "")
    dest = kwargs.get("dest") or long.lstrip("-").replace("-", "_")
    default = kwargs.get("default", False if kwargs.get("action") == "store_true" else None)
    if kwargs.get("required") is True and "default" not in kwargs:
        default = Required(long or dest)
    dests[dest] = api.facts.override(dest, default)


ARGPARSE_TYPES = {"int": int, "float": float, "str": str}
"""`type=` values the script's arguments are converted with (others stay strings)."""


class _Refusing(argparse.ArgumentParser):
    """argparse that raises where it would print usage and exit (a missing required
    argument does that even with exit_on_error=False)."""

    def error(self, message: str) -> NoReturn:
        raise argparse.ArgumentError(None, message)


def _given_arguments(api: Any, specs: list[tuple[list, dict]], argv: tuple[str, ...]) -> dict[str, Any]:
    """dest -> value of each argument `argv` (vram's --script-args) gives the script, parsed
    by argparse itself from the script's add_argument calls; defaults stay the reader's.
    Arguments argparse refuses leave every default, and the estimate says so."""
    if not argv:
        return {}
    parser = _Refusing(add_help=False, exit_on_error=False, allow_abbrev=True)
    for args, kwargs in specs:
        flags = [a for a in args if isinstance(a, str)]
        try:
            parser.add_argument(*flags, **_argparse_options(flags, kwargs))
        except (argparse.ArgumentError, TypeError, ValueError):
            continue  # a flag argparse would refuse: the script's own run would say so
    try:
        known, _ = parser.parse_known_args(list(argv))
    except argparse.ArgumentError as exc:
        api.facts.assume(f"--script-args not understood ({exc}): the script's defaults were read")
        return {}
    return {name.replace("-", "_"): value for name, value in vars(known).items()}


def _argparse_options(flags: list[str], kwargs: dict) -> dict[str, Any]:
    """add_argument's keywords as argparse takes them, from the reader's values of them."""
    options: dict[str, Any] = {"default": argparse.SUPPRESS}
    action = kwargs.get("action")
    if getattr(action, "path", "").endswith("BooleanOptionalAction"):
        options["action"] = argparse.BooleanOptionalAction
    elif action in ("store_true", "store_false", "count"):
        options["action"] = action
    elif action in ("store_const", "append_const"):
        options.update(action=action, const=kwargs.get("const"))
    else:
        options["type"] = ARGPARSE_TYPES.get(getattr(kwargs.get("type"), "name", None), str)
        if action == "append":
            options["action"] = action
        nargs = kwargs.get("nargs")
        positional = bool(flags) and not flags[0].startswith("-")
        if nargs == "+":
            options["nargs"] = "*" if positional else "+"  # a positional the argv may leave out
        elif nargs in ("?", "*") or isinstance(nargs, int) and not isinstance(nargs, bool):
            options["nargs"] = nargs
        elif positional:
            options["nargs"] = "?"
    if isinstance(kwargs.get("dest"), str) and flags and flags[0].startswith("-"):
        options["dest"] = kwargs["dest"]
    return options


def batch_of(api: Any, loader: Loader) -> Any:
    """One batch a DataLoader yields: its dataset's sample with the batch size in front."""
    batch = loader.batch_size
    if not isinstance(batch, int):
        batch = api.facts.guess_batch_size()
    sample = loader.sample

    def batched(t: Any) -> Any:  # what default_collate makes of one field of the samples
        return Tensor((batch,) + t.shape, t.dtype) if isinstance(t, Tensor) else UNKNOWN
    if isinstance(sample, Tensor):
        return batched(sample)
    if isinstance(sample, tuple):
        return tuple(batched(t) for t in sample)
    if isinstance(sample, dict):
        return {key: batched(t) for key, t in sample.items()}
    return api.facts.batch_hint(batch)


def checkpoint(api: Any, fn: Any, args: list, kwargs: dict, at: int) -> Any:
    """Activation checkpointing: the segment runs without saving, its inputs are kept,
    and backward recomputes it (counted as transient workspace)."""
    tape = api.tape
    outer_ops, outer_grad = tape.ops, tape.grad_enabled
    tape.ops = []
    try:
        inputs = [a for a in args if isinstance(a, Tensor)]
        if isinstance(fn, Module):
            api.module_depth -= 1
            try:
                out = api.call_module(fn, list(args), kwargs, at) if not api.facts.should_checkpoint(fn) else (
                    _inner(api, fn, args, kwargs, at))
            finally:
                api.module_depth += 1
        else:
            out = api.call(fn, list(args), {k: v for k, v in kwargs.items() if k != "use_reentrant"}, None)
        inner = tape.ops
    finally:
        tape.ops, tape.grad_enabled = outer_ops, outer_grad
    from tvis_tui.vram.memory import saved_bytes

    recompute = saved_bytes(inner)
    params = [p for op in inner for p in op.params]
    outs = [o for o in (out if isinstance(out, tuple) else (out,)) if isinstance(o, Tensor)]
    tape.record("checkpoint", inputs, outs, inputs, params, at)
    if tape.ops and tape.ops[-1].name == "checkpoint":
        tape.ops[-1].backward_extra = recompute
    return out


def _inner(api: Any, fn: Module, args: list, kwargs: dict, at: int) -> Any:
    from tvis_tui.vram.forward import forward
    from tvis_tui.vram.values import Function

    if fn.cls is not None and "forward" in fn.cls.methods:
        return api.interp.call_function(Function(fn.cls.methods["forward"], fn.cls.scope, fn),
                                        list(args), kwargs)
    return forward(api.tape, fn, list(args), kwargs, at)


def known_forward(api: Any, module: Module, args: list, at: int) -> Any:
    return known_models.forward(api.tape, module, args, at)
