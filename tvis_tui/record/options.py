"""What a recording captures: the `tvis run` flags that shape it, in one value.

Patterns are shell-style (fnmatch). A module pattern matches a module's qualified name
(`encoder.layers.0.attn`), any of its ancestors' names (so `encoder` takes the whole
subtree) or its class name (`Dropout`). A file pattern matches a user file's path relative
to the script's folder (`data/*.py`) or its base name (`utils.py`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Callable

CAPTURE_MODES: tuple[str, ...] = ("values", "summary")
"""values: statistics, histograms and full values under the cap; summary: no values."""


@dataclass(frozen=True)
class CaptureOptions:
    capture: str = "values"
    lines: bool = True
    grads: bool = True
    include_modules: tuple[str, ...] = ()
    exclude_modules: tuple[str, ...] = ()
    include_files: tuple[str, ...] = ()
    exclude_files: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.capture not in CAPTURE_MODES:
            raise ValueError(f"capture must be one of {', '.join(CAPTURE_MODES)}, not {self.capture!r}")

    @property
    def values(self) -> bool:
        return self.capture == "values"

    @property
    def filters_modules(self) -> bool:
        return bool(self.include_modules or self.exclude_modules)

    def module_recorded(self, qualname: str, type_name: str, root: str | None = None) -> bool:
        """Whether calls of the module named `qualname` (of class `type_name`) are recorded;
        `root`: the name of the model it is part of (`G`, or its class `Net`), an ancestor too,
        so that naming a model takes all of it, as naming any other module does."""
        if not self.filters_modules:
            return True
        names = (*_ancestors(qualname), type_name)
        if root is not None:
            names += (root, *(f"{root}.{name}" for name in _ancestors(qualname)))
        return _allowed(lambda p: any(fnmatchcase(n, p) for n in names),
                        self.include_modules, self.exclude_modules)

    def file_recorded(self, relpath: str) -> bool:
        """Whether user functions defined in `relpath` (relative to the script's folder)
        are recorded, with their lines."""
        relpath = relpath.replace(os.sep, "/")
        base = relpath.rsplit("/", 1)[-1]
        return _allowed(lambda p: fnmatchcase(relpath, p) or fnmatchcase(base, p),
                        self.include_files, self.exclude_files)

    def to_meta(self) -> dict[str, object]:
        return {"capture": self.capture, "lines": self.lines, "grads": self.grads,
                "include_modules": list(self.include_modules),
                "exclude_modules": list(self.exclude_modules),
                "include_files": list(self.include_files), "exclude_files": list(self.exclude_files)}

    def flags(self) -> list[str]:
        """The `tvis run` flags that ask for these options (none for the defaults), each
        with its value after `=`: a pattern that starts with `-` stays a value."""
        flags = [] if self.values else [f"--capture={self.capture}"]
        flags += [] if self.lines else ["--no-lines"]
        flags += [] if self.grads else ["--no-grads"]
        for flag, patterns in (("--include-modules", self.include_modules),
                               ("--exclude-modules", self.exclude_modules),
                               ("--include-files", self.include_files),
                               ("--exclude-files", self.exclude_files)):
            flags += [f"{flag}={p}" for p in patterns]
        return flags


def _allowed(matches: Callable[[str], bool], include: tuple[str, ...], exclude: tuple[str, ...]) -> bool:
    if any(matches(p) for p in exclude):
        return False
    return not include or any(matches(p) for p in include)


def _ancestors(qualname: str) -> list[str]:
    """`a.b.c` -> [`a`, `a.b`, `a.b.c`]."""
    parts = qualname.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]
