"""`tvis vram`: will a training script fit in GPU memory, and what saves how much.

The static path reads the script with tree-sitter and follows it with a small abstract
interpreter (interp.py, expr.py, api.py) over shape-only values (values.py); torch names
are modelled in torchlib.py, functional.py, methods.py, layers.py and forward.py, which
record what autograd would save on a tape (tape.py); lightning.py follows a Lightning
Trainer's fit() as the training loop. memory.py replays backward over that
tape for the peak; estimate.py turns it into the breakdown, suggest.py re-estimates with
changes applied, render.py prints. No module here imports torch except trace.py,
tracker.py and oncpu.py, which `--trace` loads on demand.
"""

from tvis_tui.vram.estimate import Estimate, estimate
from tvis_tui.vram.facts import Settings

__all__ = ["Estimate", "Settings", "estimate"]
