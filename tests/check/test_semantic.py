"""The semantic layer rules rely on: names, types, training loops, repetition, no_grad."""

from __future__ import annotations

import textwrap

from tvis_tui.check.context import Context
from tvis_tui.check.engine import check_sources
from tvis_tui.check.findings import Category, Severity
from tvis_tui.check.project import FileModel, Project
from tvis_tui.check.rule import Rule
from tvis_tui.check.source import parse


class _Probe(Rule):
    """Not a real rule: gives tests a Context."""

    id = "TV999"
    title = "probe"
    severity = Severity.INFO
    category = Category.CORRECTNESS


def contexts(*sources: str) -> list[Context]:
    files = [FileModel(parse(textwrap.dedent(src).encode(), f"m{i}.py"))
             for i, src in enumerate(sources)]
    project = Project(files)
    return [Context(project, fm, _Probe) for fm in files]


def call(ctx: Context, source_text: str):
    return next(c for c in ctx.calls if ctx.text(c.node) == source_text)


def test_qualnames_through_every_import_spelling():
    (ctx,) = contexts("""
        import torch.nn.functional as F
        from torch import nn
        from torch.optim import Adam as A
        import torch
        F.softmax(x)
        nn.CrossEntropyLoss()
        A(p)
        torch.nn.functional.relu(x)
        local.thing()
    """)
    names = [ctx.qualname(c.func) for c in ctx.calls]
    assert names == ["torch.nn.functional.softmax", "torch.nn.CrossEntropyLoss",
                     "torch.optim.Adam", "torch.nn.functional.relu", None]


def test_qualnames_through_star_imports_of_torch_modules():
    (ctx,) = contexts("""
        from torch.nn import *
        from torch.optim.lr_scheduler import *
        from torch.utils.data import *
        from mylib import *
        class Net(Module):
            pass
        def build(Linear):
            return Linear(2)
        Dropout = make_dropout
        CrossEntropyLoss(); StepLR(o); DataLoader(d); Net(); Dropout()
        print(x)
    """)
    names = {ctx.text(c.func): ctx.qualname(c.func) for c in ctx.calls}
    assert names == {
        "Linear": None,  # a parameter shadows the star import
        "CrossEntropyLoss": "torch.nn.CrossEntropyLoss",
        "StepLR": "torch.optim.lr_scheduler.StepLR",  # not torch.nn, though capitalised
        "DataLoader": "torch.utils.data.DataLoader",
        "Net": "m0.Net", "Dropout": None, "print": None,  # defined or assigned here
    }


def test_qualnames_through_assigned_aliases_of_torch_names():
    (ctx,) = contexts("""
        import torch
        import mylib
        nn = torch.nn
        F = nn.functional
        CE = nn.CrossEntropyLoss
        ops = torch.nn.functional
        ops = mylib.ops
        L = mylib.losses
        a = b
        b = a
        def step(F, x):
            return F.relu(x)
        def local(x):
            fn = torch.nn.functional
            return fn.gelu(x)
        nn.Linear(2, 3); F.softmax(x); CE(); ops.relu(x); L.cross_entropy(x); a.f()
    """)
    names = {ctx.text(c.func): ctx.qualname(c.func) for c in ctx.calls}
    assert names == {
        "nn.Linear": "torch.nn.Linear",
        "F.softmax": "torch.nn.functional.softmax",  # an alias of an alias
        "CE": "torch.nn.CrossEntropyLoss",
        "fn.gelu": "torch.nn.functional.gelu",  # an alias local to a function
        "F.relu": None,  # the parameter shadows the module-level alias
        "ops.relu": None,  # assigned twice: either value may be live
        "L.cross_entropy": None,  # not a torch name
        "a.f": None,  # a cycle of names ends as unknown
    }


def test_types_follow_single_assignments_chains_and_call_sites():
    (ctx,) = contexts("""
        import torch
        from torch import nn
        class Net(nn.Module):
            pass
        model = Net().to("cuda")
        crit = nn.CrossEntropyLoss()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        twice = 1
        twice = 2
        def train(m, o, c: nn.MSELoss):
            m(x); o.step(); c(x, y)
        train(model, opt, crit)
    """)
    assert ctx.is_model(call(ctx, "m(x)").func)
    assert ctx.is_optimizer(call(ctx, "o.step()").receiver)
    assert ctx.loss_class(call(ctx, "c(x, y)").func) == "torch.nn.MSELoss"
    assert ctx.type_of(call(ctx, "train(model, opt, crit)").args[2]) == \
        "torch.nn.CrossEntropyLoss"
    twice = [s for s in ctx.index.assignments if ctx.text(s).startswith("twice")][0]
    assert ctx.value_of(twice.child_by_field_name("left")) is None


def test_training_loops_found_through_calls_across_files():
    helper, main = contexts("""
        def step(model, batch, opt):
            model(batch).sum().backward()
            opt.step()
    """, """
        from m0 import step
        for epoch in range(3):
            for batch in loader:
                step(model, batch, opt)
        for batch in loader:
            print(batch)
    """)
    loops = main.index.loops
    assert [main.loop_trains(loop) for loop in loops] == [True, True, False]
    backward = call(helper, "model(batch).sum().backward()")
    assert helper.in_training_iteration(backward.node)
    assert [r.loop.node.start_point[0] for r in helper.repeats(backward.node)] == [3, 2]


def test_grad_disabled_by_with_decorator_and_callers():
    (ctx,) = contexts("""
        import torch
        @torch.no_grad()
        def a(m, x):
            return m(x)
        def b(m, x):
            return m(x)
        def c(m, x):
            return m(x)
        with torch.inference_mode():
            b(model, x)
        c(model, x)
        with torch.set_grad_enabled(False):
            model(x)
    """)
    flags = [ctx.grad_disabled(c.node) for c in ctx.calls if ctx.text(c.func) == "m"]
    assert flags == [True, True, False]
    assert ctx.grad_disabled(call(ctx, "model(x)").node)


def test_suppressions_and_rule_errors_do_not_stop_the_check():
    class Broken(_Probe):
        """Raises."""

        def check(self, ctx):
            raise ValueError("boom")

    source = parse(b"x = 1\n", "broken.py")
    result = check_sources([source], [Broken])
    assert result.problems[0].message.startswith("internal error in TV999: ValueError: boom")


def test_types_through_factories_and_rebinding():
    (ctx,) = contexts("""
        import torch
        from torch import nn
        def build(width):
            return nn.Sequential(nn.Linear(4, width))
        def make_opt(m):
            return torch.optim.Adam(m.parameters())
        model = build(8)
        model = model.to("cuda")
        model = torch.compile(model)
        opt = make_opt(model)
        other = nn.Linear(2, 2)
        other = nn.ReLU()
        model(x); opt.step(); other(x)
    """)
    assert ctx.type_of(call(ctx, "model(x)").func) == "torch.nn.Sequential"
    assert ctx.is_optimizer(call(ctx, "opt.step()").receiver)
    assert ctx.type_of(call(ctx, "other(x)").func) is None


def test_with_targets_are_bindings():
    (ctx,) = contexts("""
        import torch
        from torch import nn
        model = nn.Linear(2, 2)
        def run(x):
            with open("f") as model:
                model(x)
    """)
    assert ctx.type_of(call(ctx, "model(x)").func) is None


def test_types_of_unpacked_tuples():
    (ctx,) = contexts("""
        import torch
        from torch.utils.data import DataLoader
        def build():
            return DataLoader(a), DataLoader(b), 3
        train_loader, val_loader, n = build()
        opt, lr = torch.optim.SGD(p), 0.1
        train_loader.x(); n.x(); opt.x()
    """)
    assert ctx.is_dataloader(call(ctx, "train_loader.x()").receiver)
    assert ctx.type_of(call(ctx, "n.x()").receiver) is None
    assert ctx.is_optimizer(call(ctx, "opt.x()").receiver)


def test_written_out_tuples_bind_each_name_to_its_value():
    (ctx,) = contexts("""
        a, (b, c) = [], ({}, 0)
        d, *rest = [], []
        e, f = make()
        a.x(); b.x(); c.x(); d.x(); e.x()
    """)
    values = [ctx.value_of(call(ctx, f"{name}.x()").receiver) for name in "abcde"]
    assert [ctx.text(v) if v is not None else None for v in values] == \
        ["[]", "{}", "0", None, None]


def test_recursive_factories_end():
    (ctx,) = contexts("""
        def build():
            x, y = build()
            return x, y
        m, n = build()
        m.foo()
    """)
    assert ctx.type_of(call(ctx, "m.foo()").receiver) is None


def test_items_of_written_out_dicts_and_lists():
    (ctx,) = contexts("""
        from torch.utils.data import DataLoader
        loaders = {"train": DataLoader(a), "val": DataLoader(b)}
        mixed = [DataLoader(a), 3]
        loaders["train"].x(); mixed[0].x()
    """)
    assert ctx.is_dataloader(call(ctx, 'loaders["train"].x()').receiver)
    assert ctx.type_of(call(ctx, "mixed[0].x()").receiver) is None


def test_items_of_literals_passed_as_arguments():
    (ctx,) = contexts("""
        from torch.utils.data import DataLoader
        def run(loaders):
            for phase in ["train", "val"]:
                loaders[phase].x()
        run({"train": DataLoader(a), "val": DataLoader(b)})
    """)
    assert ctx.is_dataloader(call(ctx, "loaders[phase].x()").receiver)


def test_imported_files_by_module_name():
    helper, main, other = contexts("x = 1", "import m0\nfrom pkg import m2", "y = 2")
    assert main.project.imported_files(main.file) == [helper.file, other.file]
    assert helper.project.imported_files(helper.file) == []


def test_functions_passed_as_callbacks_run_where_they_are_passed():
    (ctx,) = contexts("""
        import torch
        def fit(model, opt, x):
            def closure():
                loss = model(x).sum()
                loss.backward()
                return loss
            for _ in range(10):
                opt.step(closure)
    """)
    backward = call(ctx, "loss.backward()")
    assert [r.loop.node.start_point[0] for r in ctx.repeats(backward.node)] == [7]
