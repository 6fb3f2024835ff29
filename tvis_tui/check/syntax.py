"""Small helpers over tree-sitter nodes that every layer above uses."""

from __future__ import annotations

from tree_sitter import Node


def text(node: Node | None) -> str:
    return node.text.decode("utf-8") if node is not None else ""


def dotted(node: Node | None) -> str | None:
    """`a.b.c` for a pure chain of names and attributes, else None (`f().x`, `a[0].b`)."""
    parts: list[str] = []
    while node is not None and node.type == "attribute":
        parts.append(text(node.child_by_field_name("attribute")))
        node = node.child_by_field_name("object")
    if node is None or node.type != "identifier":
        return None
    parts.append(text(node))
    return ".".join(reversed(parts))


def unwrap(node: Node | None) -> Node | None:
    """The expression inside any parentheses: `((x))` -> `x`."""
    while node is not None and node.type == "parenthesized_expression":
        inner = node.named_children
        node = inner[0] if inner else None
    return node


def identifiers(node: Node) -> list[Node]:
    """Every identifier inside `node`, in source order (the node itself included)."""
    found: list[Node] = []
    stack = [node]
    while stack:
        current = stack.pop()
        if current.type == "identifier":
            found.append(current)
        else:
            stack.extend(reversed(current.children))
    return found


def mentions(node: Node, name: str) -> bool:
    """Whether identifier `name` (or dotted `a.b`) appears inside `node`."""
    raw = name.encode()
    if raw not in node.text:
        return False
    if "." not in name:
        return any(n.text == raw for n in identifiers(node))
    stack = [node]
    while stack:
        current = stack.pop()
        if current.type == "attribute" and dotted(current) == name:
            return True
        stack.extend(current.children)
    return False


def enclosing(node: Node, *types: str, stop: tuple[str, ...] = ()) -> Node | None:
    """The nearest ancestor of one of `types`, not looking past an ancestor of a `stop` type."""
    current = node.parent
    while current is not None:
        if current.type in types:
            return current
        if current.type in stop:
            return None
        current = current.parent
    return None


def returns_of(function: Node) -> list[Node]:
    """Return statements of a function definition, not of functions nested in it."""
    found: list[Node] = []
    body = function.child_by_field_name("body")
    stack = list(body.children) if body is not None else []
    while stack:
        node = stack.pop()
        if node.type == "return_statement":
            found.append(node)
        elif node.type not in ("function_definition", "class_definition", "lambda"):
            stack.extend(node.children)
    return found
