"""Every concrete `tvis ...` command README.md shows parses with today's flags."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from tvis_tui.cli import build_parser

README = Path(__file__).resolve().parents[2] / "README.md"


def _commands() -> list[str]:
    """Commands from code blocks and `inline code`, skipping usage synopses ([OPTIONS], a|b)."""
    text = README.read_text(encoding="utf-8")
    snippets = [line.strip() for line in text.splitlines() if line.startswith("    ")]
    snippets += re.findall(r"`([^`]+)`", text)
    found = []
    for snippet in snippets:
        for part in snippet.split("#")[0].split("&&"):
            words = part.split(" > ")[0].split()
            if words and words[0] in ("tvis", ".venv/bin/tvis") and len(words) > 1:
                if not re.search(r"[\[\]|]|\.\.\.|\b[A-Z]{2,}\b", " ".join(words[1:])):
                    found.append(" ".join(words[1:]))
    return sorted(set(found))


def test_readme_shows_commands_for_every_subcommand():
    used = {c.split()[0] for c in _commands()}
    assert {"run", "tui", "check", "vram", "ls", "export"} <= used


@pytest.mark.parametrize("command", _commands())
def test_readme_command_parses(command):
    args = build_parser().parse_args(shlex.split(command))
    assert args.command == command.split()[0]


def test_readme_gpu_names_are_known():
    from tvis_tui.vram.gpus import find_gpu

    for command in _commands():
        match = re.search(r"--gpu (\S+)", command)
        if match:
            assert find_gpu(match.group(1)).key, command  # raises on an unknown GPU
