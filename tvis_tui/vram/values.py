"""The values the static reader computes with: Python constants plus stand-ins for tensors,
layers, model instances, optimizers and objects it can only partly know."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

from tree_sitter import Node

ITEMSIZE: dict[str, int] = {
    "float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4,
    "int16": 2, "int8": 1, "uint8": 1, "bool": 1, "float8": 1,
}
"""Bytes per element of each dtype name the reader uses."""


class Unknown:
    """A value the reader could not work out. Operations on it give Unknown again."""

    __slots__ = ("why",)

    def __init__(self, why: str = "") -> None:
        self.why = why

    def __repr__(self) -> str:
        return f"Unknown({self.why})"


UNKNOWN = Unknown()


def numel(shape: tuple) -> int:
    """Elements of a tensor of `shape`. A size the reader could not work out (a layer's
    width from an argument the script requires, with no default) counts nothing: the
    layer's assumption says so."""
    return math.prod(shape) if all(type(d) is int for d in shape) else 0


class Required(Unknown):
    """An argument the script requires, with no default, that --script-args did not give
    (`why` is its flag): a layer sized by it says which argument to give."""


@dataclass(eq=False)
class Tensor:
    """A tensor by shape and dtype. `base` is the tensor whose storage a view shares."""

    shape: tuple[int, ...]
    dtype: str = "float32"
    requires_grad: bool = False
    base: "Tensor | None" = None
    contiguous: bool = True

    @property
    def root(self) -> "Tensor":
        return self if self.base is None else self.base.root

    @property
    def numel(self) -> int:
        return numel(self.shape)

    @property
    def nbytes(self) -> int:
        return self.numel * ITEMSIZE.get(self.dtype, 4)


@dataclass(eq=False)
class Param:
    """An nn.Parameter (or a buffer when `buffer` is set)."""

    shape: tuple[int, ...]
    dtype: str = "float32"
    trainable: bool = True
    buffer: bool = False

    @property
    def numel(self) -> int:
        return numel(self.shape)

    def as_tensor(self) -> Tensor:
        return Tensor(self.shape, self.dtype, self.trainable and not self.buffer)


@dataclass(eq=False)
class Module:
    """An nn.Module: a built-in layer (`kind` like "Linear") or an instance of a class the
    script defines (`cls` set). `attrs` holds its parameters, sub-modules and plain values."""

    kind: str
    attrs: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    cls: "UserClass | None" = None
    line: int = 0
    known_params: int = 0
    known_act_per_sample: int = 0

    def children(self) -> list["Module"]:
        out: list[Module] = []
        for value in self.attrs.values():
            if isinstance(value, Module):
                out.append(value)
            elif isinstance(value, (list, tuple)):
                out.extend(v for v in value if isinstance(v, Module))
            elif isinstance(value, dict):
                out.extend(v for v in value.values() if isinstance(v, Module))
        return out

    def params(self) -> list[Param]:
        """Every parameter and buffer once, weight tying included."""
        seen: dict[int, Param] = {}
        stack = [self]
        while stack:
            module = stack.pop()
            for value in module.attrs.values():
                if isinstance(value, Param):
                    seen.setdefault(id(value), value)
            stack.extend(module.children())
        return list(seen.values())

    def walk(self) -> list["Module"]:
        out, stack = [], [self]
        while stack:
            module = stack.pop()
            out.append(module)
            stack.extend(module.children())
        return out


@dataclass(eq=False)
class UserClass:
    """A class the script defines: its methods, class-level values and base names."""

    name: str
    node: Node
    bases: list[Any]
    methods: dict[str, Node]
    fields: dict[str, Any]
    is_module: bool
    is_dataclass: bool
    scope: Any = None
    properties: frozenset[str] = frozenset()
    """Methods decorated as properties: reading one calls it."""


@dataclass(eq=False)
class Instance:
    """An instance of a plain (non-Module) script class, such as a config object."""

    cls: UserClass | None
    attrs: dict[str, Any] = field(default_factory=dict)


@dataclass(eq=False)
class Function:
    node: Node
    scope: Any
    self_value: Any = None


@dataclass(eq=False)
class Native:
    """A callable the reader implements itself (torch and Python built-ins)."""

    name: str
    fn: Callable[..., Any]
    self_value: Any = None


@dataclass(eq=False)
class Ref:
    """A name from an import that the reader has no model for yet (`torch.nn.functional`)."""

    path: str


@dataclass(eq=False)
class Optimizer:
    kind: str
    module: Module | None
    kwargs: dict[str, Any]
    line: int
    params: tuple[Param, ...] = ()
    """The parameters it steps, where the script's argument could be read (a GAN's two
    optimizers, or two over parts of one model, each hold state for their own)."""
    loops: set[int] = field(default_factory=set)
    """The training loops its `step()` ran in (each entry into one has its number):
    optimizers that step in one loop train together; one that stepped in an earlier loop
    only (a model trained before, then dropped; an earlier fold's) is not resident beside
    them."""


@dataclass(eq=False)
class Loader:
    """A DataLoader or dataset: what one batch looks like, as far as it is known."""

    batch_size: Any
    sample: Any
    line: int = 0
    tensors: tuple = ()


@dataclass(frozen=True)
class DType:
    """A torch dtype such as torch.bfloat16, by the names ITEMSIZE uses."""

    name: str


@dataclass(eq=False)
class Context:
    """A context manager the reader models: autocast, no_grad and friends."""

    kind: str
    dtype: str | None = None
    enabled: bool = True
    saved: Any = None
