"""Which expressions hold a tensor with its autograd graph: the outputs of models and losses,
and what is computed from them without `.item()` / `.detach()`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tree_sitter import Node

from tvis_tui.check.index import Call
from tvis_tui.check.syntax import enclosing, identifiers, text, unwrap
from tvis_tui.check.trained import is_frozen

if TYPE_CHECKING:
    from tvis_tui.check.context import Context

FUNCTIONAL_LOSSES = frozenset({
    "cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
    "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div", "cosine_embedding_loss",
    "margin_ranking_loss", "triplet_margin_loss", "ctc_loss", "poisson_nll_loss",
    "gaussian_nll_loss", "soft_margin_loss", "multi_margin_loss", "hinge_embedding_loss",
})
DETACHING_METHODS = frozenset({
    "item", "detach", "detach_", "tolist", "numpy", "size", "dim", "numel", "nelement",
    "element_size", "data_ptr", "get_device", "is_contiguous", "isnan", "isinf", "isfinite",
    "argmax", "argmin", "eq", "ne", "lt", "gt", "le", "ge", "sign", "__len__",
})
PLAIN_FUNCTIONS = frozenset({"float", "int", "bool", "str", "len", "round", "repr", "format",
                             "isinstance", "type", "id", "print"})
NON_GRAPH_ATTRIBUTES = frozenset({"shape", "dtype", "device", "data", "ndim", "is_cuda",
                                  "requires_grad", "grad", "layout", "grad_fn", "is_leaf"})
_MAX_DEPTH = 8
FLOW_HOPS = 5
"""How many assignments back `flows_into` follows: enough for REINFORCE's
`saved -> for log_prob in zip(saved, ...) -> terms.append(...) -> loss = cat(terms).sum()`."""
FILLING_METHODS = ("append", "extend", "insert", "appendleft")


def is_graph_source(ctx: "Context", call_node: Node) -> bool:
    """A call whose result has an autograd graph: a model or loss module, or a functional loss."""
    call = ctx.call_at(call_node)
    if call is None or call.func is None:
        return False
    qual = ctx.qualname(call.func)
    if qual is not None and qual.startswith("torch.nn.functional."):
        return qual.rsplit(".", 1)[-1] in FUNCTIONAL_LOSSES
    target = call.receiver if call.method == "forward" else call.func
    return ctx.is_model(target) or ctx.loss_class(target) is not None


def carries_graph(ctx: "Context", expr: Node | None, at: Node, depth: int = 0) -> bool:
    """Whether evaluating `expr` (at position `at`) yields a tensor that keeps a graph.

    Names follow their latest assignment before `at` in the same function; a name whose
    value cannot be followed counts when `name.backward()` is called in that function."""
    expr = unwrap(expr)
    if expr is None or depth > _MAX_DEPTH:
        return False
    kind = expr.type
    if kind == "identifier":
        return _name_carries(ctx, expr, at, depth)
    if kind == "binary_operator":
        return any(carries_graph(ctx, expr.child_by_field_name(side), at, depth + 1)
                   for side in ("left", "right"))
    if kind == "unary_operator":
        return carries_graph(ctx, expr.child_by_field_name("argument"), at, depth + 1)
    if kind in ("list", "tuple", "set", "expression_list"):
        return any(carries_graph(ctx, child, at, depth + 1) for child in expr.named_children)
    if kind == "dictionary":
        return any(carries_graph(ctx, pair.child_by_field_name("value"), at, depth + 1)
                   for pair in expr.named_children if pair.type == "pair")
    if kind == "conditional_expression":
        branches = expr.named_children
        return any(carries_graph(ctx, b, at, depth + 1) for b in (branches[0], branches[-1]))
    if kind == "subscript":
        return carries_graph(ctx, expr.child_by_field_name("value"), at, depth + 1)
    if kind == "attribute":
        if text(expr.child_by_field_name("attribute")) in NON_GRAPH_ATTRIBUTES:
            return False
        return carries_graph(ctx, expr.child_by_field_name("object"), at, depth + 1)
    if kind == "call":
        return _call_carries(ctx, expr, at, depth)
    return False


def _call_carries(ctx: "Context", expr: Node, at: Node, depth: int) -> bool:
    call = ctx.call_at(expr)
    if is_graph_source(ctx, expr):
        # a frozen model (a fixed feature extractor) adds no graph of its own; its output
        # has one only when its input does (a frozen discriminator on a generator's output)
        return not _runs_frozen_model(ctx, call) or \
            any(carries_graph(ctx, arg, at, depth + 1) for arg in call.args)
    if call is None:
        return False
    if call.method is not None:
        if call.method in DETACHING_METHODS:
            return False
        return carries_graph(ctx, call.receiver, at, depth + 1)
    if call.name in PLAIN_FUNCTIONS:
        return False
    qual = ctx.qualname(call.func) or ""
    if qual.startswith("torch.") and not qual.startswith("torch.nn."):
        # keywords too: `Categorical(logits=policy(x))` is built from the policy's output
        return any(carries_graph(ctx, arg, at, depth + 1)
                   for arg in [*call.args, *call.kwargs.values()])
    return any(_returns_graph(ctx, ref, depth) for ref in ctx.project.callees(ctx.file, call)
               if not ref.region.name.startswith("__"))


def _returns_graph(ctx: "Context", ref, depth: int) -> bool:
    """Whether a project function returns a tensor with a graph (`return loss_fn(...)`)."""
    from tvis_tui.check.context import Context

    key = ("returns_graph", id(ref.region.node))
    memo = ctx.project.memo
    if key not in memo:
        memo[key] = False  # recursion guard
        other = Context(ctx.project, ref.file, ctx.rule)
        memo[key] = any(carries_graph(other, value, value, depth + 1)
                        for value in ctx.project.returned(ref))
    return memo[key]


def _name_carries(ctx: "Context", name: Node, at: Node, depth: int) -> bool:
    if _backward_on_same_value(ctx, name, at):
        return True
    latest = ctx.latest_binding(name, at)
    if latest is None or latest[1] is None or _computed_without_grad(ctx, *latest):
        return False
    return carries_graph(ctx, latest[1], latest[0], depth + 1)


def _runs_frozen_model(ctx: "Context", call: Call) -> bool:
    target = call.receiver if call.method == "forward" else call.func
    return is_frozen(ctx.project, ctx.file, target) and ctx.loss_class(target) is None


def _computed_without_grad(ctx: "Context", target: Node, value: Node) -> bool:
    """`feats = backbone(x)` under `torch.no_grad()`: a result computed there has no graph
    (a plain alias, `y = loss`, is still the tensor that has one)."""
    value = unwrap(value)
    return value is not None and value.type in ("call", "binary_operator", "unary_operator") \
        and ctx.grad_disabled(target)


def _backward_on_same_value(ctx: "Context", name: Node, at: Node) -> bool:
    """Whether `name.backward()` runs on the value `name` holds at `at` (between the
    assignment that reaches `at` and the next one): proof that it has a graph."""
    function = ctx.function_of(at)
    raw = text(name)
    latest = ctx.latest_binding(name, at)
    start = latest[0].end_byte if latest is not None else function.start
    later = [target.start_byte for target, _ in ctx.symbols.bindings_of(name) or ()
             if target.start_byte >= at.start_byte and function.contains(target)]
    end = min(later, default=function.end)
    return any(start <= c.node.start_byte < end and ctx.text(c.receiver) == raw
               for c in ctx.calls_named("backward")
               if c.receiver is not None and function.contains(c.node))


def flows_into(ctx: "Context", expr: Node, at: Node) -> list[Node]:
    """`expr` and the expressions its value was made from, `FLOW_HOPS` steps back in the
    same function: the last assignment of each name in it, what was appended to a list it
    names (`terms.append(-log_prob * r)`), and the iterable of a loop variable
    (`for log_prob, r in zip(saved, returns)`)."""
    found: list[Node] = []
    seen: set[int] = set()
    frontier = [(expr, at)]
    for _ in range(FLOW_HOPS):
        following = []
        for node, where in frontier:
            if node.id in seen:
                continue
            seen.add(node.id)
            found.append(node)
            for name in identifiers(node):
                following += _made_from(ctx, name, where)
        frontier = following
    return found


def _made_from(ctx: "Context", name: Node, at: Node) -> list[tuple[Node, Node]]:
    """(expression, its position) for what the value of `name` at `at` was built from."""
    found = []
    latest = ctx.latest_binding(name, at)
    if latest is not None and latest[1] is not None:
        found.append((latest[1], latest[0]))
    elif latest is not None:
        loop = enclosing(latest[0], "for_statement", stop=("block",))
        iterable = loop.child_by_field_name("right") if loop is not None else None
        if iterable is not None:
            found.append((iterable, loop))
    function = ctx.function_of(at)
    for call in _fills(ctx).get(text(name), ()):
        if call.node.start_byte < at.start_byte and ctx.function_of(call.node) is function:
            found += [(arg, call.node) for arg in call.args]
    return found


def _fills(ctx: "Context") -> dict[str, list]:
    """`append`/`extend`/... calls of this file by the name of the list they fill."""
    key = ("fills", id(ctx.file))
    if key not in ctx.project.memo:
        found: dict[str, list] = {}
        for call in ctx.calls_named(*FILLING_METHODS):
            found.setdefault(ctx.text(call.receiver), []).append(call)
        ctx.project.memo[key] = found
    return ctx.project.memo[key]
