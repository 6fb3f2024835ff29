"""TV001: a loss or output stored with its autograd graph across iterations."""

from __future__ import annotations

from typing import Iterator

from tree_sitter import Node

from tvis_tui.check.context import Context
from tvis_tui.check.findings import Category, Finding, Severity
from tvis_tui.check.graph import carries_graph, flows_into
from tvis_tui.check.rule import Rule
from tvis_tui.check.syntax import identifiers, mentions, returns_of, text, unwrap

STORING_METHODS = {"append": 0, "extend": 0, "insert": 1, "add": 0, "appendleft": 0}
"""Container methods that keep their argument, and which positional argument that is."""

CONTAINER_MAKERS = frozenset({"list", "dict", "set", "deque", "defaultdict", "OrderedDict",
                              "collections.deque", "collections.defaultdict",
                              "collections.OrderedDict"})


class GraphKeptAlive(Rule):
    """A loss or model output is stored with its autograd graph on every iteration.

    What it does:
        Finds a tensor that still has its autograd graph (the result of a model, a loss
        module or a functional loss, or anything computed from one) being appended to a
        list, added to a running total, or stored in a dict or attribute that outlives the
        loop iteration.
    Why is this bad:
        Each stored tensor keeps its whole graph alive: every activation of the forward
        pass. Memory grows every step until the run dies with out-of-memory hours in, and
        the graphs are never used.
    Example:
        losses = []
        total = 0.0
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            losses.append(loss)
            total += loss
    Use instead:
        losses = []
        total = 0.0
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            total += loss.detach()
    Known limits:
        Sees containers made in the checked code (`[]`, `{}`, `list()`, `deque()`,
        `defaultdict()`, `a, b = [], []`, a number for running totals; filled with
        `append`, `extend`, `+= [x]` or `d[k] = x`) and tensors that come from a model or
        loss it can identify. Storage through helper objects (loggers, meters) is not
        followed. Storing inside `torch.no_grad()` is never reported, nor values computed
        there or by a frozen model (`requires_grad_(False)`, no optimizer over it).
        Collections that a later backward() differentiates (BPTT, REINFORCE, also through
        `for log_prob, r in zip(saved, returns)`) are kept on purpose and not reported, nor
        is a local list a model's forward() returns (`torch.cat(outputs, dim=1)` of an RNN
        unrolled over time steps).
    """

    id = "TV001"
    title = "loss or output stored with its autograd graph"
    severity = Severity.ERROR
    category = Category.MEMORY_LEAK
    fix = "store loss.item() (a float) or loss.detach() instead of the tensor"

    def check(self, ctx: Context) -> Iterator[Finding]:
        for call in ctx.calls_named(*STORING_METHODS):
            stored = call.arg(STORING_METHODS[call.method], None) if call.method else None
            if stored is not None and _persists(ctx, _container(call.receiver), call.node,
                                                numeric=False):
                yield from _report(ctx, call.node, stored, ctx.text(call.receiver))
        for node in ctx.index.aug_assignments:
            target = node.child_by_field_name("left")
            value = node.child_by_field_name("right")
            numeric = target.type != "subscript" and not _extends(value)
            if text(node.child_by_field_name("operator")) in ("+=", "-=") and \
                    _persists(ctx, _container(target), node, numeric=numeric):
                yield from _report(ctx, node, value, ctx.text(target))
        for node in ctx.index.assignments:
            target = node.child_by_field_name("left")
            value = node.child_by_field_name("right")
            if target is None or value is None:
                continue
            if target.type == "subscript" and _persists(ctx, _container(target), node,
                                                        numeric=False):
                yield from _report(ctx, node, value, ctx.text(target))
            elif _self_sum(ctx, target, value) and _persists(ctx, target, node, numeric=True):
                yield from _report(ctx, node, value, ctx.text(target))


def _report(ctx: Context, node: Node, stored: Node, where: str) -> Iterator[Finding]:
    holder = _root_name(where)
    if ctx.grad_disabled(node) or not carries_graph(ctx, stored, node) or \
            _feeds_backward(ctx, holder, node) or _returned_by_forward(ctx, holder, node):
        return
    what = ctx.text(unwrap(stored)).split("\n", 1)[0]
    yield ctx.finding(node, f"`{what}` is kept with its autograd graph in `{where}` on every "
                            "iteration; store `.item()` or `.detach()`")


def _root_name(where: str) -> str:
    """`losses` for `losses["a"]`, `self.buf` for `self.buf[i]`."""
    return where.split("[", 1)[0]


def _feeds_backward(ctx: Context, holder: str, after: Node) -> bool:
    """Whether a backward() differentiates what was collected (BPTT over time steps,
    REINFORCE over an episode): keeping the graph is then the point. A local name must feed
    a later backward() in the same function; an attribute (`self.log_probs`,
    `policy.log_probs`) any backward() in the checked files that uses that attribute."""
    if "." in holder:
        return holder.rsplit(".", 1)[1] in _attributes_fed_to_backward(ctx)
    function = ctx.function_of(after)
    for call in ctx.calls_named("backward", "manual_backward"):
        if call.node.start_byte >= after.end_byte and ctx.function_of(call.node) is function:
            loss = call.receiver if not call.args else call.args[0]
            if loss is not None and any(mentions(node, holder)
                                        for node in flows_into(ctx, loss, call.node)):
                return True
    return False


def _returned_by_forward(ctx: Context, holder: str, after: Node) -> bool:
    """Whether a model's forward() returns what it collected (an RNN unrolled over time
    steps, `torch.cat(outputs, dim=1)`): the caller's backward differentiates it, and the
    list dies when forward returns."""
    function = ctx.function_of(after)
    if "." in holder or function.kind != "function" or function.name != "forward":
        return False
    for ret in returns_of(function.node):
        value = ret.named_children[0] if ret.named_children else None
        if value is not None and ret.start_byte >= after.end_byte and \
                any(mentions(node, holder) for node in flows_into(ctx, value, ret)):
            return True
    return False


def _attributes_fed_to_backward(ctx: Context) -> set[str]:
    """Attribute names used in what any backward() in the checked files differentiates."""
    key = ("tv001_backward_attributes",)
    if key not in ctx.project.memo:
        found: set[str] = set()
        for fm in ctx.project.files:
            other = Context(ctx.project, fm, ctx.rule)
            for call in other.calls_named("backward", "manual_backward"):
                loss = call.receiver if not call.args else call.args[0]
                for node in flows_into(other, loss, call.node) if loss is not None else ():
                    found |= {text(n) for n in identifiers(node)
                              if n.parent is not None and n.parent.type == "attribute"
                              and n.parent.child_by_field_name("attribute") == n}
        ctx.project.memo[key] = found
    return ctx.project.memo[key]


def _extends(value: Node | None) -> bool:
    """`losses += [loss]`: `+=` with a written-out list or tuple adds items to a container
    (like `extend`), where `total += loss` adds to a running number."""
    value = unwrap(value)
    return value is not None and value.type in ("list", "tuple", "list_comprehension")


def _container(target: Node | None) -> Node | None:
    """`d` for `d[k]` and `d.setdefault(k, [])`; the target itself otherwise."""
    target = unwrap(target)
    while target is not None:
        if target.type == "subscript":
            target = unwrap(target.child_by_field_name("value"))
        elif target.type == "call" and _method_name(target) in ("setdefault", "get"):
            target = unwrap(target.child_by_field_name("function").child_by_field_name("object"))
        else:
            return target
    return None


def _method_name(call: Node) -> str | None:
    func = call.child_by_field_name("function")
    return text(func.child_by_field_name("attribute")) if func.type == "attribute" else None


def _self_sum(ctx: Context, target: Node, value: Node) -> bool:
    """`total = total + x`: a running sum written without `+=`."""
    value = unwrap(value)
    return value is not None and value.type == "binary_operator" and \
        text(value.child_by_field_name("operator")) == "+" and \
        ctx.text(target) in (ctx.text(value.child_by_field_name("left")),
                             ctx.text(value.child_by_field_name("right")))


def _persists(ctx: Context, holder: Node | None, at: Node, numeric: bool) -> bool:
    """Whether `holder` outlives one iteration of the loop that runs `at` and is proven to be
    a container (or, for running totals, a number or tensor)."""
    if holder is None or holder.type not in ("identifier", "attribute"):
        return False
    bindings = ctx.symbols.bindings_of(holder)
    if not bindings:
        return _object_attribute_persists(ctx, holder, at, numeric)
    made = [value for _, value in bindings if value is not None and _is_start(ctx, value, numeric)]
    if not made:
        return False
    loops = ctx.loops_around(at)
    if loops:
        inner = loops[0]
        name = ctx.text(holder)
        return not any(inner.contains(target) and value is not None and not mentions(value, name)
                       for target, value in bindings)
    function = ctx.function_of(at)
    local = any(function.contains(target) for target, _ in bindings)
    return (holder.type == "attribute" or not local) and bool(ctx.repeats(at))


def _object_attribute_persists(ctx: Context, holder: Node, at: Node, numeric: bool) -> bool:
    """`tracker.losses` where `tracker` is an object of a checked-file class whose methods
    set `self.losses = []`: it persists as long as `tracker` does."""
    owner = holder.child_by_field_name("object") if holder.type == "attribute" else None
    if owner is None or owner.type != "identifier":
        return False
    cls = ctx.project.project_class(ctx.type_of(owner), ctx.file)
    if cls is None:
        return False
    fm, region = cls
    attribute = "self." + text(holder.child_by_field_name("attribute"))
    inner = Context(ctx.project, fm, ctx.rule)
    made = [value for _, value in fm.symbols.bindings.get((region, attribute), ())
            if value is not None and _is_start(inner, value, numeric)]
    return bool(made) and _persists_name(ctx, owner, at)


def _persists_name(ctx: Context, name: Node, at: Node) -> bool:
    """Whether the object a name holds is the same across iterations of the loop around
    `at` (not re-created inside it)."""
    loops = ctx.loops_around(at)
    bindings = ctx.symbols.bindings_of(name) or []
    if loops:
        return not any(loops[0].contains(target) for target, _ in bindings)
    return bool(ctx.repeats(at)) and not any(ctx.function_of(at).contains(target)
                                             for target, _ in bindings)


def _is_start(ctx: Context, value: Node, numeric: bool) -> bool:
    value = unwrap(value)
    if numeric:
        if value.type in ("integer", "float"):
            return True
        qual = ctx.qualname(value.child_by_field_name("function")) if value.type == "call" else None
        return qual in ("torch.tensor", "torch.zeros", "torch.zeros_like", "torch.scalar_tensor")
    if value.type in ("list", "dictionary", "set", "list_comprehension",
                      "dictionary_comprehension"):
        return True
    if value.type == "call":
        func = value.child_by_field_name("function")
        name = ctx.qualname(func) or ctx.text(func)
        return name in CONTAINER_MAKERS or name.rsplit(".", 1)[-1] in CONTAINER_MAKERS
    return False
