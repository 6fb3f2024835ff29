"""Whether `python` would accept a file: compiled, never run. Shared by the checker and the
VRAM estimator, which both read scripts with tree-sitter, whose grammar takes code Python
refuses (Python 2's `print "x"`) and misses some it accepts (`return *a, *b`)."""

from __future__ import annotations

import ast
import warnings


def compile_source(data: bytes, filename: str) -> None:
    """Raise the SyntaxError `python` would raise before running `data` (ValueError,
    RecursionError or MemoryError where the compiler cannot tell). Compiled, not only
    parsed: so the errors only the compiler finds (`break` outside a loop, `return` outside
    a function) count as they do for `python`, and compiling costs less than building the
    AST's Python objects. The compiler's warnings (`x is 1`) are not ours to print; nor,
    under `-W error`, errors. A notebook's top-level `await`, exported as a script, is taken
    as IPython takes it (it was read before compiling was)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compile(data, filename, "exec", ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
