"""tvis: a step-through debugger for PyTorch training that lives in the terminal."""

__version__ = "0.1.0"
