"""The rules of `tvis check`, one per module. How to add one:

1. Create `tvis_tui/check/rules/tvNNN_short_name.py` (the next free id in the range you were
   given; ids are never reused; the file name must start with the lower-case id)
   defining exactly ONE subclass of `Rule`. It is found automatically: no list to edit.
   (Shortened from tv009_discarded_to.py; read the real rules for complete examples.)

       from typing import Iterator
       from tvis_tui.check.context import Context
       from tvis_tui.check.findings import Category, Finding, Severity
       from tvis_tui.check.rule import Rule

       class DiscardedTo(Rule):
           '''`x.to(device)` whose result is thrown away.

           What it does:
               Finds `tensor.to(...)` / `.cuda()` used as a statement on a tensor.
           Why is this bad:
               Tensors are not moved in place; the computation stays on the CPU.
           Example:
               x.to(device)
           Use instead:
               x = x.to(device)
           Known limits:
               Only plain names ...
           '''

           id = "TV009"
           title = "tensor .to()/.cuda() result discarded"     # short, lower case, no period
           severity = Severity.ERROR       # ERROR: wrong results/crash; WARNING: costly; INFO: perf
           category = Category.CORRECTNESS # CONVERGENCE, MEMORY_LEAK, WASTED_COMPUTE,
                                           # REPRODUCIBILITY, CORRECTNESS
           fix = "assign the result: x = x.to(device)"   # default suggested fix (JSON `fix`)

           def check(self, ctx: Context) -> Iterator[Finding]:
               for call in ctx.calls_named("to", "cuda"):
                   ...
                   yield ctx.finding(call.node, "result of .to() is discarded")

   The docstring: a summary line, then the five sections, each heading alone on a line
   ending in ":" ("What it does:", "Why is this bad:", "Example:", "Use instead:",
   "Known limits:"), bodies indented. Example / Use instead bodies are Python code.
   A finding may lower its severity for a milder variant: ctx.finding(..., severity=...).
   `tvis check --explain TVNNN` and docs/rules.md are generated from it; regenerate the docs
   with `.venv/bin/tvis check --list-rules --format markdown > docs/rules.md`
   (tests/check/test_rules_meta.py fails until you do; it also checks the docstring
   sections, that Example/Use instead parse, and that the rule has a TVNNN_*.py fixture and
   at least 3 `# expect:` true positives).

   Run: `.venv/bin/python -m pytest tests/check -q` and
   `.venv/bin/python scripts/score_check.py` (lists every false positive/negative).

2. Fixtures: `tests/check/fixtures/TVNNN_<what>.py`, several per rule: true positives AND
   look-alike negatives (correct code that resembles the bug). Mark each line where a finding
   must START with a trailing comment `# expect: TVNNN` (several ids: `# expect: TV001,TV003`).
   A real bug your rule cannot find yet gets `# known-miss: TVNNN` instead: tests accept it
   either way and score_check.py counts it as a false negative (honest recall).
   A fixture checks with ALL rules, so an unmarked finding from any rule is a failure: when
   your new rule rightly fires on an existing fixture or corpus file, add the marker there;
   when it wrongly fires, fix the rule.
   Every fixture must be real, parseable Python. tests/check/test_fixtures.py picks up every
   file in fixtures/ and corpus/ (no table to edit). Cross-file cases: a folder
   `tests/check/fixtures/TVNNN_<what>/` with several .py files is checked as one project.

3. Corpus: add realistic scripts under `tests/check/corpus/` (same `# expect:` markers) —
   whole small training scripts in different styles (plain loop, functions, Lightning-ish
   class, HF-ish, GAN). `scripts/score_check.py` prints precision/recall per rule over the
   corpus AND fixtures; keep every rule >= 0.8 and the total at precision >= 0.95,
   recall >= 0.9. It also plants bugs into clean scripts (scripts/check_mutants.py: one
   small `Operator(rule, description, text -> mutated text or None)` per rule) for a recall
   figure on code the rule was not written against; add an operator for your rule if a
   regex can plant its bug.

The `Context` a rule receives (tvis_tui/check/context.py) — prefer these over raw syntax:
  ctx.calls / ctx.calls_named("step", "zero_grad") / ctx.calls_in(node) / ctx.call_at(node)
      `Call` objects: .node, .func, .name (bare name or last attribute), .method (attribute
      name or None), .receiver (object before the dot), .args, .kwargs, .arg(i, "kw"),
      .has_splat (True when *args/**kwargs are passed: stay silent about missing options),
      .region (innermost Region), .line
  ctx.qualname(node)      `F.softmax` -> "torch.nn.functional.softmax" through imports;
                          a class/function defined in the file -> "<module>.Name" (module from
                          the path: pkg/models.py -> pkg.models), as an import of it would give
  ctx.value_of(node)      the one expression assigned to a name / `self.x` (None if assigned
                          0 or 2+ times, or a parameter); ctx.resolve(node) follows chains
  ctx.type_of(node)       qualified class of a value: constructor calls, names assigned once
                          (re-binding `m = m.to(d)` ignored), `.to()/.cuda()` chains,
                          factory functions' returns, tuple unpacking (`a, b = build()`),
                          parameter annotations, and arguments passed at every call site
                          of the function (across files)
  ctx.is_optimizer(node) / ctx.is_model(node) / ctx.loss_class(node) / ctx.is_dataloader(node)
  ctx.is_backward(call) / ctx.is_optimizer_step(call) / ctx.is_zero_grad(call)
  ctx.step_events()       (call, optimizer) for every step, incl. calls of helpers that step
  ctx.grad_resets(node)   zero_grad calls and `p.grad = None` inside node
  ctx.loops_around(node)  enclosing for/while Regions in the same function, innermost first
  ctx.training_loops() / ctx.loop_trains(region)   loops whose body runs backward() or
                          optimizer.step(), directly or through called functions (cross-file)
  ctx.repeats(node)       what runs node repeatedly: own loops, else loops around the call
                          sites of its function (transitively; a function passed as a
                          callback, `opt.step(closure)`, runs where it is passed), else a
                          Lightning hook
  ctx.in_training_iteration(node)
  ctx.grad_disabled(node) under no_grad/inference_mode/set_grad_enabled(False), a decorator,
                          or a function whose every caller is
  ctx.context_managers(node)  qualnames of enclosing `with` items and decorators
  ctx.function_of(node) / ctx.callers(function_region)
  ctx.text(node) / ctx.dotted(node)
  ctx.finding(node, message, fix=None)   what `check` yields
  ctx.latest_binding(name, at)  (target, value) of the last assignment to `name` before
                          `at` in the same function — flow-sensitive, unlike value_of
  ctx.loss_calls() / ctx.loss_of_call(call)  calls of loss modules / functional losses
  ctx.reaches(node, test) / ctx.runs_step(node) / ctx.runs_grad_reset(node)
                          does running `node` (or a function it calls) do X
Shared analyses (import them in a rule):
  tvis_tui/check/graph.py        carries_graph(ctx, expr, at): tensor still has its autograd
                                 graph; is_graph_source(ctx, call_node): model/loss call;
                                 flows_into(ctx, expr, at): what a value was built from
  tvis_tui/check/trained.py      is_trained / is_frozen(project, file, model), freezes(call)
  tvis_tui/check/activations.py  output_kind(ctx, expr, at) -> softmax / log_softmax /
                                 sigmoid / logits; loss_inputs(ctx, {loss qualnames})
  tvis_tui/check/training.py     is_backward, is_optimizer_step, is_zero_grad, grad_resets,
                                 repeats, grad_disabled, context_managers, reaches
  tvis_tui/check/syntax.py       text, dotted, unwrap, identifiers, mentions, enclosing,
                                 returns_of
  tvis_tui/check/kinds.py        library name tables (optimizers, models, losses, loaders,
                                 no_grad contexts); extend them there rather than in a rule
Lower layers (ctx.index: regions/calls/assignments/aug_assignments/statements/loops/
comprehensions;
ctx.symbols: imports/bindings; ctx.project: cross-file classes/functions/callers) are there
when a rule needs them.

Speed: `python scripts/bench_check.py` must stay under 5 s per 100,000 lines with every
rule. Start from an index (`ctx.calls_named(...)`, `ctx.index.aug_assignments`, ...), never
walk the whole tree, and ask costly questions (type_of, carries_graph) last.

Ground rules: never import torch; a rule that fires on ordinary correct code is worse than no
rule, so when the code does not prove the bug (unknown type, **kwargs, dynamic values), stay
silent. Keep a rule under ~150 lines; put reusable analysis in context.py/training.py.
"""
