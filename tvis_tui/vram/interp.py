"""A small abstract interpreter for the statements of a training script.

It runs module-level code, called functions and model methods over the values in
`values.py`. It never executes the script: unknown names and calls give Unknown, loops
that train run once, other loops run up to a bound, and a step budget keeps it fast.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Iterator
from typing import Any

from tree_sitter import Node

from tvis_tui.vram import expr
from tvis_tui.vram.source import contains_call, line, named, text
from tvis_tui.vram.values import UNKNOWN, Function, Instance, Module, Unknown, UserClass

MAX_LOOP = 256
"""Iterations a non-training loop runs before the reader stops following it."""

MAX_STEPS = 100_000
"""Statements and expressions evaluated per script; beyond it the reader stops following."""

MAX_SECONDS = 0.5
"""Wall time per script: the static estimate promises an answer in under a second."""

TRAINING_CALLS = {"backward", "step"}


class Scope:
    """Names of one function call or module. `file` is None for the script being estimated
    and the module name for a sibling file it imports."""

    def __init__(self, parent: "Scope | None" = None, file: str | None = None) -> None:
        self.vars: dict[str, Any] = {}
        self.parent = parent
        self.file = file if file is not None or parent is None else parent.file

    def get(self, name: str) -> Any:
        scope: Scope | None = self
        while scope is not None:
            if name in scope.vars:
                return scope.vars[name]
            scope = scope.parent
        return Unknown(f"name {name}")

    def set(self, name: str, value: Any) -> None:
        self.vars[name] = value


class Return(Exception):
    def __init__(self, value: Any) -> None:
        self.value = value


class Break(Exception):
    pass


class Continue(Exception):
    pass


class OutOfBudget(Exception):
    pass


class Interp:
    """Evaluates one script. `api` resolves torch and library names; `facts` collects what
    the training setup is (batch size, optimizer, autocast...)."""

    def __init__(self, api: Any, facts: Any, tape: Any) -> None:
        self.api = api
        self.facts = facts
        self.tape = tape
        self.steps = 0
        self.depth = 0
        self.training_loops = 0
        # The training loops running now, outermost first, each by its entry: a loop in a
        # helper called once per fold is a new one each time.
        self.loop_stack: list[int] = []
        self._loop_entries = itertools.count()
        self.scopes: list[Scope] = []
        self.deadline = time.monotonic() + MAX_SECONDS
        self.out_of_budget = False
        self.current_file: str | None = None
        self.main_line = 0

    def restart_budget(self) -> None:
        self.steps = 0
        self.deadline = time.monotonic() + MAX_SECONDS / 2

    def tick(self) -> None:
        self.steps += 1
        if self.steps > MAX_STEPS or (self.steps % 2048 == 0 and time.monotonic() > self.deadline):
            self.out_of_budget = True
            raise OutOfBudget()

    # statements -----------------------------------------------------------------------
    def exec_block(self, node: Node | None, scope: Scope) -> None:
        if node is None:
            return
        for stmt in named(node):
            self.exec_stmt(stmt, scope)

    def at(self, node: Node | None) -> int:
        """The script line to report for `node`: its own line in the script, or for code in
        a sibling file, the line of the script's statement that led there."""
        if node is None or self.current_file is not None:
            return self.main_line
        return line(node)

    def exec_stmt(self, node: Node, scope: Scope) -> None:
        self.tick()
        self.current_file = scope.file
        if scope.file is None:
            self.main_line = line(node)
        kind = node.type
        handler = getattr(self, f"_s_{kind}", None)
        if handler is not None:
            handler(node, scope)
        elif kind == "expression_statement":
            for child in named(node):
                self.eval(child, scope)
        elif kind in ("block", "module"):
            self.exec_block(node, scope)

    def _s_import_statement(self, node: Node, scope: Scope) -> None:
        self.api.do_import(node, scope)

    _s_import_from_statement = _s_import_statement

    def _s_function_definition(self, node: Node, scope: Scope) -> None:
        scope.set(text(node.child_by_field_name("name")), Function(node, scope))

    def _s_class_definition(self, node: Node, scope: Scope, decorators: list[str] = ()) -> None:
        name = text(node.child_by_field_name("name"))
        bases = []
        supers = node.child_by_field_name("superclasses")
        for base in named(supers) if supers is not None else []:
            if base.type != "keyword_argument":
                bases.append(self.eval(base, scope))
        body = node.child_by_field_name("body")
        methods, fields, properties = {}, {}, set()
        for stmt in named(body) if body is not None else []:
            target = stmt.child_by_field_name("definition") if stmt.type == "decorated_definition" else stmt
            if target is not None and target.type == "function_definition":
                kind = _decorated_as(stmt) if stmt is not target else None
                if kind == "accessor":
                    continue  # `@x.setter`: reading `x` still calls the getter
                methods[text(target.child_by_field_name("name"))] = target
                if kind == "property":
                    properties.add(text(target.child_by_field_name("name")))
            elif stmt.type == "expression_statement" and named(stmt)[0].type == "assignment":
                assign = named(stmt)[0]
                right = assign.child_by_field_name("right")
                field = text(assign.child_by_field_name("left"))
                fields[field] = self.facts.override(
                    field, self.eval(right, scope) if right is not None else UNKNOWN)
        is_module = any(self.api.is_module_base(b) for b in bases)
        for base in bases:
            if isinstance(base, UserClass):
                properties |= base.properties - methods.keys()
                methods = {**base.methods, **methods}
                fields = {**base.fields, **fields}
        scope.set(name, UserClass(name, node, bases, methods, fields, is_module,
                                  "dataclass" in " ".join(decorators), scope, frozenset(properties)))

    def _s_decorated_definition(self, node: Node, scope: Scope) -> None:
        definition = node.child_by_field_name("definition")
        decorators = [text(d) for d in named(node) if d.type == "decorator"]
        if definition is not None and definition.type == "class_definition":
            self._s_class_definition(definition, scope, decorators)
        elif definition is not None:
            self.exec_stmt(definition, scope)

    def _s_return_statement(self, node: Node, scope: Scope) -> None:
        values = named(node)
        raise Return(self.eval(values[0], scope) if values else None)

    def _s_break_statement(self, node: Node, scope: Scope) -> None:
        raise Break()

    def _s_continue_statement(self, node: Node, scope: Scope) -> None:
        raise Continue()

    def _s_if_statement(self, node: Node, scope: Scope) -> None:
        cond = self.eval(node.child_by_field_name("condition"), scope)
        if isinstance(cond, Unknown) or bool(cond):
            # An unknown condition takes the first branch: scripts put the usual path first.
            self.exec_block(node.child_by_field_name("consequence"), scope)
            return
        for alt in node.children_by_field_name("alternative"):
            if alt.type == "elif_clause":
                c = self.eval(alt.child_by_field_name("condition"), scope)
                if isinstance(c, Unknown) or bool(c):
                    self.exec_block(alt.child_by_field_name("consequence"), scope)
                    return
            else:
                self.exec_block(alt.child_by_field_name("body"), scope)
                return

    def _s_for_statement(self, node: Node, scope: Scope) -> None:
        body = node.child_by_field_name("body")
        iterable = self.eval(node.child_by_field_name("right"), scope)
        target = node.child_by_field_name("left")
        trains = contains_call(body, TRAINING_CALLS)
        items = self.api.iterate(iterable, node, trains)
        if isinstance(iterable, Unknown) and not trains and self.current_file is None:
            self.facts.assume(f"loop at line {self.at(node)} runs an unknown number of times; "
                              "what it builds is not counted")
        limit = 1 if trains else MAX_LOOP
        with self.training_loop(node, scope) if trains else contextlib.nullcontext():
            for i, item in enumerate(items):
                if i >= limit:
                    break
                expr.assign(self, target, item, scope)
                try:
                    self.exec_block(body, scope)
                except Break:
                    break
                except Continue:
                    continue

    def _s_while_statement(self, node: Node, scope: Scope) -> None:
        body = node.child_by_field_name("body")
        if contains_call(body, TRAINING_CALLS):
            with self.training_loop(node, scope):
                try:
                    self.exec_block(body, scope)
                except (Break, Continue):
                    pass

    @contextlib.contextmanager
    def training_loop(self, node: Node, scope: Scope) -> Iterator[None]:
        """One pass of a loop that trains (a `for`, a `while`, a library's `fit()`): the
        optimizers that step inside it train together."""
        self.training_loops += 1
        self.facts.note_training_loop(node, scope, self)
        self.loop_stack.append(next(self._loop_entries))
        try:
            yield
        finally:
            self.loop_stack.pop()

    def _s_with_statement(self, node: Node, scope: Scope) -> None:
        managers = []
        for item in (n for n in named(node) if n.type == "with_clause"):
            for with_item in named(item):
                value_node = with_item.child_by_field_name("value")
                target = None
                if value_node is not None and value_node.type == "as_pattern":
                    target = value_node.child_by_field_name("alias")
                    value_node = named(value_node)[0]
                manager = self.eval(value_node, scope)
                entered = self.api.enter(manager, node)
                managers.append(manager)
                if target is not None:
                    expr.assign(self, named(target)[0] if target.named_child_count else target,
                                entered, scope)
        try:
            self.exec_block(node.child_by_field_name("body"), scope)
        finally:
            for manager in reversed(managers):
                self.api.exit(manager)

    def _s_try_statement(self, node: Node, scope: Scope) -> None:
        self.exec_block(node.child_by_field_name("body"), scope)

    def _s_global_statement(self, node: Node, scope: Scope) -> None:
        return None

    # calls ---------------------------------------------------------------------------
    def call_function(self, fn: Function, args: list, kwargs: dict) -> Any:
        if self.depth > 30:
            return Unknown("recursion")
        scope = Scope(fn.scope)
        params = fn.node.child_by_field_name("parameters")
        args = ([fn.self_value] if fn.self_value is not None else []) + list(args)
        expr.bind_params(self, params, args, kwargs, scope)
        self.depth += 1
        self.scopes.append(scope)
        caller_file, self.current_file = self.current_file, scope.file
        try:
            body = fn.node.child_by_field_name("body")
            if fn.node.type == "lambda":
                return self.eval(body, scope)
            self.exec_block(body, scope)
        except Return as ret:
            return ret.value
        finally:
            self.depth -= 1
            self.scopes.pop()
            self.current_file = caller_file
        return None

    def instantiate(self, cls: UserClass, args: list, kwargs: dict, line: int) -> Any:
        """A script class called: a Module runs __init__ over a fresh Module, a dataclass
        fills its fields, other classes run __init__ over a plain Instance."""
        if cls.is_module:
            obj: Any = Module(cls.name, cls=cls, line=line)
        else:
            obj = Instance(cls, dict(cls.fields) if cls.is_dataclass else {})
        init = cls.methods.get("__init__")
        if init is not None:
            self.call_function(Function(init, cls.scope, obj), args, kwargs)
        elif cls.is_dataclass:
            for name, value in zip(list(cls.fields), args):
                obj.attrs[name] = value
            obj.attrs.update(kwargs)
        post = cls.methods.get("__post_init__")
        if post is not None:
            self.call_function(Function(post, cls.scope, obj), [], {})
        return obj

    def run_module(self, root: Node, scope: Scope) -> None:
        """Run a whole script; a script too long to follow stops where the budget ends."""
        self.scopes.append(scope)
        try:
            self.exec_block(root, scope)
        except (OutOfBudget, Return, Break, Continue, RecursionError):
            pass
        finally:
            self.scopes.pop()

    def eval(self, node: Node | None, scope: Scope) -> Any:
        if node is None:
            return None
        self.tick()
        return expr.evaluate(self, node, scope)


def _decorated_as(definition: Node) -> str | None:
    """"property" for a getter (`@property`, `@cached_property`), "accessor" for its
    `@x.setter` or `@x.deleter`, None for any other decorated function."""
    for decorator in named(definition):
        if decorator.type != "decorator":
            continue
        said = text(decorator).lstrip("@").strip()
        if said.rsplit(".", 1)[-1] in ("property", "cached_property"):
            return "property"
        if said.endswith((".setter", ".deleter")):
            return "accessor"
    return None
