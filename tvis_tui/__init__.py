"""tvis: a step-through debugger for PyTorch training that lives in the terminal."""

import sys

__version__ = "0.1.0"

PYTHON_MODULES = frozenset(sys.modules)
"""The modules loaded before tvis's first one: python's startup and the console script's.
A script's folder cannot shadow these under plain python either (record/shadowing.py)."""
