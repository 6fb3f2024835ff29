"""A checked file as the semantic layer sees it, and references to its functions."""

from __future__ import annotations

from dataclasses import dataclass

from tvis_tui.check.index import FileIndex, Region
from tvis_tui.check.source import SourceFile
from tvis_tui.check.symbols import Symbols


class FileModel:
    """One checked file: its source, index and symbols."""

    def __init__(self, source: SourceFile) -> None:
        self.source = source
        self.path = source.path
        self.index = FileIndex(source)
        self.module = module_name(source.path)
        self.symbols = Symbols(self.index, self.module)
        self.package = self.module.rpartition(".")[0]

    def provides(self, module: str) -> bool:
        """Whether `import module` may mean this file: `models` or `pkg.models` for
        pkg/models.py (the checked paths do not say where the import root is)."""
        return self.module == module or self.module.endswith("." + module) or \
            module.endswith("." + self.module)


def module_name(path: str) -> str:
    """`pkg.models` for pkg/models.py, `pkg` for pkg/__init__.py (from the display path)."""
    parts = [p for p in path.replace("\\", "/").removesuffix(".py").split("/")
             if p not in ("", ".", "..")]
    if len(parts) > 1 and parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts) or "__main__"


@dataclass(frozen=True)
class FunctionRef:
    """A function (or method) defined in one of the checked files."""

    file: FileModel
    region: Region

    @property
    def is_method(self) -> bool:
        return self.region.parent is not None and self.region.parent.kind == "class"
