"""Expression evaluation, assignment and argument binding for the interpreter."""

from __future__ import annotations

import operator
from typing import Any

from tree_sitter import Node

from tvis_tui.vram.source import named, text
from tvis_tui.vram.values import UNKNOWN, Instance, Module, Tensor, Unknown

_BINARY = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
    "//": operator.floordiv, "%": operator.mod, "**": operator.pow, "@": operator.matmul,
    "<<": operator.lshift, ">>": operator.rshift, "&": operator.and_, "|": operator.or_,
}
_COMPARE = {"<": operator.lt, ">": operator.gt, "<=": operator.le, ">=": operator.ge,
            "==": operator.eq, "!=": operator.ne, "in": lambda a, b: a in b,
            "not in": lambda a, b: a not in b, "is": operator.is_,
            "is not": operator.is_not}


def evaluate(it: Any, node: Node, scope: Any) -> Any:
    handler = _HANDLERS.get(node.type)
    if handler is None:
        return Unknown(node.type)
    try:
        return handler(it, node, scope)
    except (TypeError, ValueError, ZeroDivisionError, KeyError, IndexError,
            AttributeError, OverflowError, RecursionError):
        return Unknown(f"cannot evaluate {text(node)[:40]}")


def _literal(it, node, scope):
    return {"integer": lambda s: int(s.replace("_", ""), 0), "float": lambda s: float(
        s.replace("_", "")), "true": lambda s: True, "false": lambda s: False,
        "none": lambda s: None}[node.type](text(node))


def _string(it, node, scope):
    parts = []
    for child in named(node):
        if child.type == "string_content":
            parts.append(text(child))
        elif child.type == "interpolation":
            value = it.eval(child.child_by_field_name("expression"), scope)
            parts.append(str(value))
    return "".join(parts)


def _concat(it, node, scope):
    return "".join(str(it.eval(c, scope)) for c in named(node))


def _identifier(it, node, scope):
    return scope.get(text(node))


def _attribute(it, node, scope):
    obj = it.eval(node.child_by_field_name("object"), scope)
    return it.api.getattr(obj, text(node.child_by_field_name("attribute")), node)


def _sequence(it, node, scope):
    items = []
    for child in named(node):
        if child.type == "list_splat":
            value = it.eval(named(child)[0], scope)
            items.extend(value if isinstance(value, (list, tuple)) else [value])
        else:
            items.append(it.eval(child, scope))
    return tuple(items) if node.type in ("tuple", "expression_list") else items


def _dictionary(it, node, scope):
    out = {}
    for child in named(node):
        if child.type == "pair":
            key = it.eval(child.child_by_field_name("key"), scope)
            value = it.eval(child.child_by_field_name("value"), scope)
            out[key] = it.facts.override(key, value) if isinstance(key, str) else value
        elif child.type == "dictionary_splat":
            value = it.eval(named(child)[0], scope)
            if isinstance(value, dict):
                out.update(value)
    return out


def _comprehension(it, node, scope):
    from tvis_tui.vram.interp import Scope

    body = node.child_by_field_name("body")
    clauses = [c for c in named(node) if c.type in ("for_in_clause", "if_clause")]
    results: list = []

    def run(index: int, inner: Any) -> None:
        if len(results) > 4096:
            return
        if index == len(clauses):
            if body.type == "pair":
                results.append((it.eval(body.child_by_field_name("key"), inner),
                                it.eval(body.child_by_field_name("value"), inner)))
            else:
                results.append(it.eval(body, inner))
            return
        clause = clauses[index]
        if clause.type == "if_clause":
            cond = it.eval(named(clause)[0], inner)
            if isinstance(cond, Unknown) or cond:
                run(index + 1, inner)
            return
        values = it.api.iterate(it.eval(clause.child_by_field_name("right"), inner), clause, False)
        for value in list(values)[:1024]:
            child = Scope(inner)
            assign(it, clause.child_by_field_name("left"), value, child)
            run(index + 1, child)

    run(0, Scope(scope))
    if node.type == "dictionary_comprehension":
        return {key: value for key, value in results if not isinstance(key, Unknown)}
    return tuple(results) if node.type == "generator_expression" else list(results)


def _binary(it, node, scope):
    left = it.eval(node.child_by_field_name("left"), scope)
    right = it.eval(node.child_by_field_name("right"), scope)
    op = text(node.child_by_field_name("operator"))
    return binary(it, op, left, right, node)


def binary(it: Any, op: str, left: Any, right: Any, node: Node) -> Any:
    if isinstance(left, Tensor) or isinstance(right, Tensor):
        return it.api.tensor_binary(op, left, right, node)
    if isinstance(left, Unknown) or isinstance(right, Unknown):
        return left if isinstance(left, Unknown) else right  # keeps why (`args.scale ** 2`)
    if op == "/" and isinstance(left, (int, float)) and right == 0:
        return Unknown("division by zero")
    return _BINARY[op](left, right)


def _unary(it, node, scope):
    value = it.eval(node.child_by_field_name("argument"), scope)
    if isinstance(value, (Unknown, Tensor)):
        return value
    op = text(node.child_by_field_name("operator"))
    return {"-": operator.neg, "+": operator.pos, "~": operator.invert}[op](value)


def _not(it, node, scope):
    value = it.eval(node.child_by_field_name("argument"), scope)
    return value if isinstance(value, Unknown) else not value


def _boolean(it, node, scope):
    left = it.eval(node.child_by_field_name("left"), scope)
    op = text(node.child_by_field_name("operator"))
    if isinstance(left, Unknown):
        return it.eval(node.child_by_field_name("right"), scope)
    if (op == "and") == bool(left):
        return it.eval(node.child_by_field_name("right"), scope)
    return left


def _compare(it, node, scope):
    parts = named(node)
    ops = [text(o) if o.type != "not in" else "not in"
           for o in node.children_by_field_name("operators")]
    ops = [" ".join(o.split()) for o in ops]
    values = [it.eval(p, scope) for p in parts]
    for (a, b), op in zip(zip(values, values[1:]), ops):
        if isinstance(a, (Unknown, Tensor)) or isinstance(b, (Unknown, Tensor)):
            return Unknown("comparison")
        if not _COMPARE[op](a, b):
            return False
    return True


def _conditional(it, node, scope):
    body, cond, other = named(node)
    value = it.eval(cond, scope)
    if isinstance(value, Unknown) or value:
        return it.eval(body, scope)
    return it.eval(other, scope)


def _subscript(it, node, scope):
    value = it.eval(node.child_by_field_name("value"), scope)
    keys = [it.eval(k, scope) for k in node.children_by_field_name("subscript")]
    return it.api.subscript(value, keys, node)


def _slice(it, node, scope):
    parts: list[Any] = [None, None, None]
    index = 0
    for child in node.children:
        if child.type == ":":
            index += 1
        else:
            parts[index] = it.eval(child, scope)
    return slice(*parts)


def _call(it, node, scope):
    fn = it.eval(node.child_by_field_name("function"), scope)
    args, kwargs = call_args(it, node.child_by_field_name("arguments"), scope)
    return it.api.call(fn, args, kwargs, node, scope)


def call_args(it: Any, arg_list: Node | None, scope: Any) -> tuple[list, dict]:
    args: list = []
    kwargs: dict = {}
    if arg_list is None:
        return args, kwargs
    if arg_list.type == "generator_expression":
        return [it.eval(arg_list, scope)], kwargs
    for child in named(arg_list):
        if child.type == "keyword_argument":
            name = text(child.child_by_field_name("name"))
            kwargs[name] = it.facts.override(name, it.eval(child.child_by_field_name("value"), scope))
        elif child.type == "list_splat":
            value = it.eval(named(child)[0], scope)
            args.extend(value if isinstance(value, (list, tuple)) else [value])
        elif child.type == "dictionary_splat":
            value = it.eval(named(child)[0], scope)
            if isinstance(value, dict):
                kwargs.update({str(k): v for k, v in value.items()})
            elif isinstance(value, Instance):
                kwargs.update(value.attrs)
        else:
            args.append(it.eval(child, scope))
    return args, kwargs


def _assignment(it, node, scope):
    right = node.child_by_field_name("right")
    value = it.eval(right, scope) if right is not None else UNKNOWN
    if right is not None:
        assign(it, node.child_by_field_name("left"), value, scope)
    return value


def _augmented(it, node, scope):
    left = node.child_by_field_name("left")
    op = text(node.child_by_field_name("operator"))[:-1]
    value = binary(it, op, it.eval(left, scope), it.eval(node.child_by_field_name("right"), scope),
                   node)
    assign(it, left, value, scope)
    return value


def _named_expression(it, node, scope):
    value = it.eval(node.child_by_field_name("value"), scope)
    scope.set(text(node.child_by_field_name("name")), value)
    return value


def _lambda(it, node, scope):
    from tvis_tui.vram.values import Function

    return Function(node, scope)


def _parens(it, node, scope):
    inner = named(node)
    return it.eval(inner[0], scope) if inner else ()


def assign(it: Any, target: Node, value: Any, scope: Any) -> None:
    kind = target.type
    if kind == "identifier":
        scope.set(text(target), it.facts.override(text(target), value))
    elif kind in ("pattern_list", "tuple_pattern", "list_pattern", "tuple", "list",
                  "expression_list"):
        targets = named(target)
        items = it.api.unpack(value, len(targets))
        for sub, item in zip(targets, items):
            assign(it, sub, item, scope)
    elif kind == "attribute":
        obj = it.eval(target.child_by_field_name("object"), scope)
        it.api.setattr(obj, text(target.child_by_field_name("attribute")), value, target)
    elif kind == "subscript":
        obj = it.eval(target.child_by_field_name("value"), scope)
        keys = [it.eval(k, scope) for k in target.children_by_field_name("subscript")]
        if isinstance(obj, (dict, list)) and len(keys) == 1 and not isinstance(keys[0], Unknown):
            try:
                obj[keys[0]] = value
            except (IndexError, TypeError):
                pass
        elif isinstance(obj, Module) and len(keys) == 1:
            obj.attrs[str(keys[0])] = value
    elif kind in ("parenthesized_expression", "list_splat_pattern"):
        inner = named(target)
        if inner:
            assign(it, inner[0], value, scope)


def bind_params(it: Any, params: Node | None, args: list, kwargs: dict, scope: Any) -> None:
    """Bind call arguments to a def's parameters, filling defaults and *args/**kwargs."""
    args = list(args)
    for param in named(params) if params is not None else []:
        kind = param.type
        if kind == "identifier" or kind == "typed_parameter" and param.named_children[0].type == "identifier":
            name = text(param if kind == "identifier" else param.named_children[0])
            scope.set(name, args.pop(0) if args else kwargs.pop(name, Unknown(f"argument {name}")))
        elif kind in ("default_parameter", "typed_default_parameter"):
            name = text(param.child_by_field_name("name"))
            if args:
                scope.set(name, args.pop(0))
            elif name in kwargs:
                scope.set(name, kwargs.pop(name))
            else:
                scope.set(name, it.eval(param.child_by_field_name("value"), scope.parent))
        elif kind == "list_splat_pattern" or (kind == "typed_parameter" and param.named_children[0].type == "list_splat_pattern"):
            inner = param if kind == "list_splat_pattern" else param.named_children[0]
            scope.set(text(named(inner)[0]), tuple(args))
            args = []
        elif kind == "dictionary_splat_pattern" or (kind == "typed_parameter" and param.named_children[0].type == "dictionary_splat_pattern"):
            inner = param if kind == "dictionary_splat_pattern" else param.named_children[0]
            scope.set(text(named(inner)[0]), dict(kwargs))


_HANDLERS = {
    "integer": _literal, "float": _literal, "true": _literal, "false": _literal,
    "none": _literal, "string": _string, "concatenated_string": _concat,
    "identifier": _identifier, "attribute": _attribute, "list": _sequence, "tuple": _sequence,
    "expression_list": _sequence, "set": _sequence, "dictionary": _dictionary,
    "list_comprehension": _comprehension, "generator_expression": _comprehension,
    "set_comprehension": _comprehension, "dictionary_comprehension": _comprehension,
    "binary_operator": _binary, "unary_operator": _unary, "not_operator": _not,
    "boolean_operator": _boolean, "comparison_operator": _compare,
    "conditional_expression": _conditional, "subscript": _subscript, "slice": _slice,
    "call": _call, "assignment": _assignment, "augmented_assignment": _augmented,
    "named_expression": _named_expression, "lambda": _lambda,
    "parenthesized_expression": _parens, "keyword_argument": lambda it, n, s: UNKNOWN,
    "await": lambda it, n, s: it.eval(named(n)[0], s),
}
