"""While recording, `warnings.warn` still names the line Python would, and TorchScript still
compiles code that warns."""

from __future__ import annotations

import subprocess
import sys
import warnings

from tvis_tui.record import warning_sites

from .helpers import tvis_cli, tvis_env


def _where(warn) -> list[tuple[str, int]]:
    """(file, line) of each warning the calls below raise, under the given `warn`."""
    def lib(**kwargs):
        warn("about my caller", stacklevel=2, **kwargs)

    def own_line():
        warn("here", stacklevel=0)
        warn(UserWarning("an instance"))
        warn("too deep", stacklevel=500)

    def user(**kwargs):
        lib(**kwargs)
        own_line()

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        user()
        if sys.version_info >= (3, 12):
            user(skip_file_prefixes=("/nowhere",))
    return [(w.filename, w.lineno) for w in seen]


def test_warnings_land_where_they_would_without_tvis():
    plain = _where(warnings.warn)
    undo = warning_sites.install()
    try:
        wrapped = _where(warnings.warn)
    finally:
        undo()
    assert wrapped == plain
    assert all(not file.startswith(warning_sites.TVIS_DIR) for file, _ in wrapped)


HOOK_WARNS_IN_BACKWARD = """
import torch
from torch import nn
lin = nn.Linear(2, 1)
lin.register_full_backward_hook(lambda m, grad_in, grad_out: None)
loss = lin(torch.ones(3, 2)).sum()  # no input requires grad: torch warns, naming this line
loss.backward()
"""


def test_a_warning_from_a_backward_hook_names_the_backward_line_as_under_python(tmp_path):
    # torch counts frames up from the hook (stacklevel=5); tvis's wrapper of backward() is
    # among them.
    (tmp_path / "warns.py").write_text(HOOK_WARNS_IN_BACKWARD)
    under_python = subprocess.run([sys.executable, "warns.py"], cwd=tmp_path, env=tvis_env(),
                                  capture_output=True, text=True, timeout=60)
    proc = tvis_cli("run", "--name", "w", "warns.py", cwd=tmp_path)
    assert proc.returncode == under_python.returncode == 0
    warned = under_python.stderr.splitlines()[:2]
    assert warned[0].startswith(f"{tmp_path / 'warns.py'}:7: UserWarning: Full backward hook is firing")
    assert proc.stderr.splitlines()[:2] == warned


def test_a_module_that_warns_is_still_scripted(run_inprocess):
    code, run = run_inprocess("""
import warnings
import torch

class Careful(torch.nn.Module):
    def forward(self, x):
        if x.shape[0] > 100:
            warnings.warn("big batch")
        return x * 2

print(torch.jit.script(Careful())(torch.ones(2)).tolist())
""")
    assert code == 0


def test_the_wrapper_is_undone():
    original = warnings.warn
    undo = warning_sites.install()
    assert warnings.warn is not original
    undo()
    assert warnings.warn is original
