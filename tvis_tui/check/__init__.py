"""`tvis check`: a tree-sitter rule engine that finds costly training bugs statically.

Layers, bottom up (none imports torch; none runs the checked code):
  source.py    read + parse one file, `# tvis: ignore[...]` comments
  index.py     per-file index from one tree-sitter query: regions, calls, assignments
  symbols.py   import aliases, qualified names, single-assignment tracking
  kinds.py     which library names are optimizers, models, losses, loaders
  files.py     a checked file (index + symbols + module name), references to functions
  typeflow.py  types of values (constructors, assignments, returns, call-site arguments)
  project.py   all checked files: classes, the call graph across them (+ typeflow)
  training.py  backward/step/zero_grad, training loops, repetition, no_grad context
  graph.py, activations.py, loaders.py, ...   shared analyses some rules need
  context.py   the `Context` a rule's `check()` receives
  rule.py, registry.py   the Rule base class and auto-discovery of tvis_tui/check/rules/
  engine.py, config.py, report.py, docs.py   running, pyproject config, output, --explain
How to add a rule: tvis_tui/check/rules/__init__.py.
"""
