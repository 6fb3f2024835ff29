"""`tvis check PATH...`: find costly training bugs without running or importing the script."""

from __future__ import annotations

import argparse

FORMATS = ("text", "json", "sarif", "markdown")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", metavar="PATH",
                        help="Python files or folders to check (default: .)")
    parser.add_argument("--format", choices=FORMATS, default="text",
                        help="output format (markdown: only with --list-rules)")
    parser.add_argument("--select", metavar="IDS",
                        help="comma-separated rule ids or prefixes to run (default: all)")
    parser.add_argument("--ignore", metavar="IDS", help="comma-separated rule ids to skip")
    parser.add_argument("--fail-on", metavar="SEVERITY", default=None,
                        help="exit 1 when a finding at or above this severity exists "
                             "(info, warning, error; default: info); files that do not "
                             "parse always exit 1")
    parser.add_argument("--list-rules", action="store_true", help="list the rules and exit")
    parser.add_argument("--explain", metavar="ID", help="print the write-up of one rule")
    parser.add_argument("--gpu", metavar="GPU",
                        help="also estimate VRAM on this GPU (see `tvis gpus`)")
    parser.add_argument("--no-config", action="store_true",
                        help="ignore [tool.tvis.check] in pyproject.toml")


def main(args: argparse.Namespace) -> int:
    from pathlib import Path

    from tvis_tui.check import docs, engine, report
    from tvis_tui.check.config import CheckConfig, load_config
    from tvis_tui.check.findings import Severity
    from tvis_tui.check.registry import all_rules, rule_by_id, select_rules
    from tvis_tui.errors import TvisError

    if args.explain:
        print(docs.explain(rule_by_id(args.explain)), end="")
        return 0
    if args.list_rules:
        rules = all_rules()
        print(docs.markdown(rules) if args.format == "markdown" else docs.rule_table(rules),
              end="")
        return 0
    if args.format == "markdown":
        raise TvisError("--format markdown only applies to --list-rules")
    paths = args.paths or ["."]
    config = CheckConfig() if args.no_config else load_config(Path(paths[0]))
    select = _ids(args.select) if args.select else config.select
    ignore = _ids(args.ignore) if args.ignore else config.ignore
    rules = select_rules(select, ignore)
    fail_on = Severity.parse(args.fail_on) if args.fail_on else (config.fail_on or Severity.INFO)
    result = engine.check_paths(paths, rules, config)
    if args.gpu:
        files = [display for _, display in engine.collect_files(paths)]
        result.findings = engine.sorted_findings(
            result.findings + _vram_findings(files, args.gpu))
    if args.format == "json":
        print(report.render_json(result))
    elif args.format == "sarif":
        print(report.render_sarif(result, rules))
    else:
        print(report.render_text(result, _line_reader()))
    return engine.exit_code(result, fail_on)


def _ids(raw: str) -> list[str]:
    return [part.strip().upper() for part in raw.split(",") if part.strip()]


def _vram_findings(paths: list[str], gpu: str) -> list:
    """The VRAM estimator's findings, when that part of tvis is installed."""
    import importlib

    from tvis_tui.errors import TvisError

    try:
        hook = importlib.import_module("tvis_tui.vram.check_hook")
    except ModuleNotFoundError:
        raise TvisError("--gpu is unavailable: this tvis has no VRAM estimator") from None
    from tvis_tui.check.findings import Finding

    return [Finding.from_json(item) for item in hook.vram_findings(paths, gpu)]


def _line_reader():
    """Source lines for the text report, read once per file."""
    cache: dict[str, list[str]] = {}

    def line_of(path: str, line: int) -> str:
        if path not in cache:
            try:
                cache[path] = open(path, encoding="utf-8").read().splitlines()
            except (OSError, UnicodeDecodeError):
                cache[path] = []
        lines = cache[path]
        return lines[line - 1] if 0 < line <= len(lines) else ""

    return line_of
