"""`tvis check PATH...`: find costly training bugs without running or importing the script."""

from __future__ import annotations

import argparse

FORMATS = ("text", "json", "sarif", "markdown")
VRAM_RULE = "TV900"
"""The id under which `--gpu` adds the VRAM estimator's verdict to the findings."""


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
                        help="also estimate VRAM on this GPU (see `tvis gpus`); only a "
                             "\"does not fit\" verdict fails the check")
    parser.add_argument("--no-config", action="store_true",
                        help="ignore [tool.tvis.check] in pyproject.toml")


def main(args: argparse.Namespace) -> int:
    from dataclasses import replace
    from pathlib import Path

    from tvis_tui.check import docs, engine
    from tvis_tui.check.config import CheckConfig, load_config
    from tvis_tui.check.findings import Finding, Severity
    from tvis_tui.check.registry import all_rules, rule_by_id, select_rules
    from tvis_tui.errors import TvisError

    if args.explain is not None:  # "" is an id no rule has, not "no --explain"
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
    select = _ids(args.select, "--select") if args.select is not None else config.select
    ignore = _ids(args.ignore, "--ignore") if args.ignore is not None else config.ignore
    rules = select_rules(select, ignore)
    fail_on = Severity.parse(args.fail_on) if args.fail_on else (config.fail_on or Severity.INFO)
    estimator = _vram_estimator(args.gpu) if args.gpu else None  # a bad GPU name fails first
    result = engine.check_paths(paths, rules, config)
    if not result.files_checked and not result.problems:
        raise TvisError(f"no Python files found in {', '.join(paths)}; nothing was checked")
    if estimator is not None:
        files = [display for _, display in engine.collect_files(paths)]
        result.findings = engine.sorted_findings(
            result.findings + [Finding.from_json(item) for item in estimator(files, args.gpu)])
    _print(result, rules, args.format)
    return engine.exit_code(replace(result, findings=[
        f for f in result.findings if _counts_toward_exit(f)]), fail_on)


def _print(result, rules: list, output_format: str) -> None:
    from tvis_tui.check import report

    if output_format == "json":
        print(report.render_json(result))
    elif output_format == "sarif":
        print(report.render_sarif(result, rules))
    else:
        print(report.render_text(result, _line_reader()))


def _ids(raw: str, option: str) -> list[str]:
    """The rule ids in `--select TV001,TV002`; an option that names none (`--select ,`) is a
    mistake that would otherwise run no rules and pass."""
    from tvis_tui.errors import TvisError

    ids = [part.strip().upper() for part in raw.split(",") if part.strip()]
    if not ids:
        raise TvisError(f"{option} {raw!r} names no rule; give ids or prefixes like TV001,TV02")
    return ids


def _counts_toward_exit(finding) -> bool:
    """A VRAM verdict fails the check only when the script does not fit: "fits" and
    "tight" are reports, and would otherwise fail every run under the default --fail-on."""
    from tvis_tui.check.findings import Severity

    return finding.rule != VRAM_RULE or finding.severity is Severity.ERROR


def _vram_estimator(gpu: str):
    """The VRAM estimator's `vram_findings(paths, gpu)`, when that part of tvis is installed,
    after checking that it knows `gpu`."""
    import importlib

    from tvis_tui.errors import TvisError

    try:
        hook = importlib.import_module("tvis_tui.vram.check_hook")
        from tvis_tui.vram.gpus import find_gpu
    except ModuleNotFoundError:
        raise TvisError("--gpu is unavailable: this tvis has no VRAM estimator") from None
    try:
        find_gpu(gpu)
    except TvisError:
        # the estimator's own message offers --gpu-memory, which only `tvis vram` takes
        raise TvisError(f"unknown GPU {gpu!r}; `tvis gpus` lists the known ones") from None
    return hook.vram_findings


def _line_reader():
    """Source lines for the text report, read once per file."""
    from pathlib import Path

    from tvis_tui.check.source import decode_source

    cache: dict[str, list[str]] = {}

    def line_of(path: str, line: int) -> str:
        if path not in cache:
            try:  # decoded as the check read it (a `# coding: latin-1` file too)
                cache[path] = decode_source(Path(path).read_bytes()).splitlines()
            except (OSError, UnicodeDecodeError, LookupError):
                cache[path] = []
        lines = cache[path]
        return lines[line - 1] if 0 < line <= len(lines) else ""

    return line_of
