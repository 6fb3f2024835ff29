"""The viewer's screens (`tvis tui`), one per file; they read a run only through the store.

run_picker.py  the runs in a folder; Enter opens one
debugger.py    call tree, source, inspector and status line over one run; its keys in
               stepping_keys.py, where each key lands in stepping.py, what a call shows in call_view.py
values.py      one tensor's stored values, sliced and paged (prompt.py asks for the slice)
step_view.py   one training step: the loss plot, decoded predictions, each sample as the data made it
params_view.py every parameter across the optimizer steps: gradient norm, update/weight, weight norm
exception.py   a whole exception and traceback; help.py every key (and docs/tui-keys.md)
"""
