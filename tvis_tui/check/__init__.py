"""`tvis check`: a tree-sitter rule engine that finds costly training bugs statically.

Layers, bottom up (none imports torch; none runs the checked code):
  source.py    read + parse one file, `# tvis: ignore[...]` comments
  index.py     per-file index from one tree-sitter query: regions, calls, assignments
  symbols.py   import aliases, qualified names, single-assignment tracking
  kinds.py     which library names are optimizers, models, losses, loaders
  project.py   types of values and the call graph across the checked files
  training.py  backward/step/zero_grad, training loops, repetition, no_grad context
  context.py   the `Context` a rule's `check()` receives
  rule.py, registry.py   the Rule base class and auto-discovery of tvis_tui/check/rules/
  engine.py, config.py, report.py, docs.py   running, pyproject config, output, --explain
How to add a rule: tvis_tui/check/rules/__init__.py.
"""
