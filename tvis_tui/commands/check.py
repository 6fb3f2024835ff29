"""`tvis check` (being built)."""

from __future__ import annotations

import argparse

from tvis_tui.errors import TvisError


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("rest", nargs=argparse.REMAINDER)


def main(args: argparse.Namespace) -> int:
    raise TvisError("tvis check is not built yet")
