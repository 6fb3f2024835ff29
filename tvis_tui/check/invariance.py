"""Whether an expression has the same value on every iteration of a loop: no name it reads is
rebound in the loop, nothing it reads is changed in place there, and every call it makes is a
pure function of what it reads (`len(x)`, `np.log(w)`, `w.sum()`, not `random.random()`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tree_sitter import Node

from tvis_tui.check.index import Call, Region
from tvis_tui.check.syntax import dotted, unwrap

if TYPE_CHECKING:
    from tvis_tui.check.context import Context

PURE_BUILTINS = frozenset({"len", "float", "int", "bool", "abs", "round", "min", "max", "sum",
                           "list", "tuple", "range", "sorted"})
PURE_MODULES = ("math.", "numpy.")
IMPURE_MODULES = ("numpy.random.",)
"""Checked before PURE_MODULES: `np.random.rand(3)` draws new values on every call."""
PURE_METHODS = frozenset({"sum", "mean", "prod", "max", "min", "std", "var", "norm", "sqrt",
                          "exp", "log", "abs", "clip", "clamp", "cumsum", "reshape", "view",
                          "flatten", "squeeze", "unsqueeze", "transpose", "astype", "float",
                          "double", "long", "int", "half", "bool", "tolist", "numpy", "copy",
                          "clone"})
"""Array and tensor methods whose result depends only on the receiver and arguments; any
other method (`sched.get_last_lr()`, `rng.normal()`) may answer differently each time."""


def invariant_in(ctx: "Context", node: Node, loop: Region) -> bool:
    """Whether `node` evaluates to the same value on every iteration of `loop`."""
    return not _rebound(ctx, node, loop) and not _changed(ctx, node, loop) and \
        all(_pure(ctx, call) for call in ctx.calls_in(node))


def _rebound(ctx: "Context", node: Node, loop: Region) -> bool:
    """A name in `node` is assigned inside the loop (loop variables included)."""
    return any(loop.contains(target) for name in _names_read(node)
               for target, _ in ctx.symbols.bindings_of(name) or ())


def _names_read(node: Node) -> list[Node]:
    """The variables `node` reads: not attribute fields (`cfg.margin` reads `cfg`, whatever
    a loop variable called `margin` holds) nor keyword names (`device=` in a call)."""
    found: list[Node] = []
    stack = [node]
    while stack:
        current = stack.pop()
        if current.type == "identifier":
            found.append(current)
        elif current.type == "attribute":
            stack.append(current.child_by_field_name("object"))
        elif current.type == "keyword_argument":
            stack.append(current.child_by_field_name("value"))
        else:
            stack.extend(current.children)
    return found


def _changed(ctx: "Context", node: Node, loop: Region) -> bool:
    """Something `node` reads is changed in the loop without rebinding a name: `w[i] = v`,
    `self.count += 1`, `w.mul_(0.9)` change `w` / `self.count` for every later read."""
    changed = _changed_chains(ctx, loop)
    return any(read == chain or read.startswith(chain + ".") or chain.startswith(read + ".")
               for read in _chains_read(node) for chain in changed)


def _changed_chains(ctx: "Context", loop: Region) -> set[str]:
    key = ("changed_chains", id(loop))
    if key not in ctx.project.memo:
        targets = [n.child_by_field_name("left") for n in
                   ctx.index.assignments + ctx.index.aug_assignments if loop.contains(n)]
        targets += [c.receiver for c in ctx.calls_in(loop.node)
                    if c.method is not None and c.method.endswith("_")]
        ctx.project.memo[key] = {chain for chain in map(_base_chain, targets) if chain}
    return ctx.project.memo[key]


def _base_chain(target: Node | None) -> str | None:
    """`self.buf` for `self.buf[i][j]`: the name or attribute whose value a write changes."""
    target = unwrap(target)
    while target is not None and target.type == "subscript":
        target = unwrap(target.child_by_field_name("value"))
    return dotted(target)


def _chains_read(node: Node) -> set[str]:
    """The longest names and attribute chains read in `node` (`self.cfg.eps`, not `self`)."""
    found: set[str] = set()
    stack = [node]
    while stack:
        current = stack.pop()
        chain = dotted(current) if current.type in ("identifier", "attribute") else None
        if chain is not None:
            found.add(chain)
        else:
            stack.extend(current.children)
    return found


def _pure(ctx: "Context", call: Call) -> bool:
    """A call whose result depends only on its arguments (see the tables above)."""
    qual = ctx.qualname(call.func)
    if qual is not None:
        return qual.startswith(PURE_MODULES) and not qual.startswith(IMPURE_MODULES)
    if call.method is None:
        return call.name in PURE_BUILTINS
    return call.method in PURE_METHODS
