"""Which files `tvis check FOLDER` reads, and how config files are found."""

from __future__ import annotations

from tvis_tui.check.config import load_config
from tvis_tui.check.engine import collect_files


def test_folders_skip_hidden_cache_and_installed_code(tmp_path):
    for rel in (".venv/lib/a.py", "__pycache__/b.py", "env/lib/site-packages/c.py",
                "node_modules/d.py", "src/train.py", "src/notes.txt", "main.py"):
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x = 1\n")
    found = [display for _, display in collect_files([str(tmp_path)])]
    assert found == [str(tmp_path / "main.py"), str(tmp_path / "src" / "train.py")]


def test_nearest_pyproject_wins(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.tvis.check]\nignore = ["TV001"]\n')
    inner = tmp_path / "pkg"
    inner.mkdir()
    (inner / "pyproject.toml").write_text('[tool.tvis.check]\nselect = ["TV002"]\n')
    (inner / "train.py").write_text("")
    config = load_config(inner / "train.py")
    assert config.select == ["TV002"] and config.ignore == []
    assert load_config(tmp_path).ignore == ["TV001"]
