"""`tvis check` as a user runs it: output formats, options, exit codes, suppressions, config."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import types
import warnings

import pytest

from tvis_tui.cli import main

LEAKY = textwrap.dedent("""\
    import torch
    from torch import nn

    model = nn.Linear(4, 2)
    criterion = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for x, y in [(torch.randn(2, 4), torch.tensor([0, 1]))]:
        opt.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss)
""")
LEAK_LINE = 13


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(LEAKY)
    return path


ONLY_TV001 = ("--select", "TV001")
"""Tests that pin exact output look at one rule, so rules added later cannot disturb them."""


def run(capsys, *argv):
    code = main(["check", *map(str, argv)])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_text_output_names_place_rule_and_underlines_source(script, capsys):
    code, out, _ = run(capsys, *ONLY_TV001, script)
    assert code == 1
    lines = out.splitlines()
    assert lines[0].startswith(f"{script}:{LEAK_LINE}:5: TV001 [error] `loss` is kept")
    assert lines[1] == "        losses.append(loss)"
    assert lines[2] == "        " + "^" * len("losses.append(loss)")
    assert lines[-1] == "1 finding in 1 file"


def test_json_output_has_every_field(script, capsys):
    code, out, _ = run(capsys, *ONLY_TV001, "--format", "json", script)
    doc = json.loads(out)
    (finding,) = doc["findings"]
    assert code == 1 and finding == {
        "path": str(script), "line": LEAK_LINE, "column": 5, "end_line": LEAK_LINE,
        "end_column": 24, "rule": "TV001", "category": "memory leak", "severity": "error",
        "message": finding["message"], "fix": finding["fix"]}
    assert "item()" in finding["fix"]


def test_sarif_output_is_sarif_2_1_0(script, capsys):
    _, out, _ = run(capsys, *ONLY_TV001, "--format", "sarif", script)
    doc = json.loads(out)
    assert doc["version"] == "2.1.0" and doc["$schema"].endswith("sarif-2.1.0.json")
    (sarif_run,) = doc["runs"]
    driver = sarif_run["tool"]["driver"]
    assert driver["name"] == "tvis"
    ids = [rule["id"] for rule in driver["rules"]]
    (result,) = sarif_run["results"]
    assert result["ruleId"] == "TV001" and ids[result["ruleIndex"]] == "TV001"
    assert result["level"] == "error"
    region = result["locations"][0]["physicalLocation"]["region"]
    assert region == {"startLine": LEAK_LINE, "startColumn": 5, "endLine": LEAK_LINE,
                      "endColumn": 24}


def test_sarif_locations_are_uri_references(tmp_path, capsys, monkeypatch):
    folder = tmp_path / "dir with space" / "ünï"
    folder.mkdir(parents=True)
    (folder / "bug ñ.py").write_text(LEAKY)
    monkeypatch.chdir(tmp_path)
    _, out, _ = run(capsys, *ONLY_TV001, "--format", "sarif", "dir with space")
    (result,) = json.loads(out)["runs"][0]["results"]
    uri = result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    assert uri == "dir%20with%20space/%C3%BCn%C3%AF/bug%20%C3%B1.py"


def test_clean_file_exits_zero(tmp_path, capsys):
    path = tmp_path / "clean.py"
    path.write_text(LEAKY.replace("losses.append(loss)", "losses.append(loss.item())"))
    code, out, _ = run(capsys, *ONLY_TV001, path)
    assert code == 0 and out.strip() == "0 findings in 1 file"


def test_fail_on_threshold(script, capsys):
    assert run(capsys, *ONLY_TV001, "--fail-on", "error", script)[0] == 1
    assert run(capsys, "--select", "TV001,TV002", "--fail-on", "error", "--ignore", "TV001",
               script)[0] == 0


@pytest.mark.parametrize("argv", [["--fail-on", "fatal"], ["--select", "TV999"],
                                  ["--explain", "TV999"], ["--explain", ""], ["--format", "markdown"],
                                  ["--select", ","], ["--ignore", " , "]])
def test_usage_errors_exit_2_with_one_line(script, capsys, argv):
    code, _, err = run(capsys, *argv, script)
    assert code == 2 and err.startswith("tvis: error:") and err.count("\n") == 1


def test_missing_path_is_usage_error(tmp_path, capsys):
    code, _, err = run(capsys, tmp_path / "nope.py")
    assert code == 2 and "no such file or folder" in err


def test_paths_that_are_not_files_say_what_they_are(tmp_path, capsys):
    loop = tmp_path / "loop.py"
    loop.symlink_to(tmp_path / "other.py")
    (tmp_path / "other.py").symlink_to(loop)
    fifo = tmp_path / "fifo.py"
    os.mkfifo(fifo)
    dangling = tmp_path / "dangling.py"
    dangling.symlink_to(tmp_path / "gone.py")
    for path, why in [(loop, "symbolic link loop"), (fifo, "not a regular file (a named pipe)"),
                      ("/dev/null", "not a regular file (a character device)"),
                      (dangling, "broken symbolic link")]:
        code, out, err = run(capsys, path)
        assert code == 2 and out == "" and err.startswith(f"tvis: error: {path}: {why}")
        assert err.count("\n") == 1


def test_a_pipe_inside_a_folder_is_skipped_not_read(script, capsys):
    os.mkfifo(script.parent / "pipe.py")  # reading it would block forever
    code, out, _ = run(capsys, *ONLY_TV001, script.parent)
    assert code == 1 and "pipe.py:1:1: E000 skipped: not a regular file (a named pipe)" in out
    assert f"{script}:{LEAK_LINE}:5: TV001" in out


def test_folder_without_python_files_is_an_error(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("x = 1\n")
    code, out, err = run(capsys, tmp_path)
    assert code == 2 and out == ""
    assert err == f"tvis: error: no Python files found in {tmp_path}; nothing was checked\n"


def test_coding_declaration_is_honoured(tmp_path, capsys):
    path = tmp_path / "latin.py"
    path.write_bytes(("# -*- coding: latin-1 -*-\nname = 'caf\xe9'\n" + LEAKY)
                     .encode("latin-1"))
    code, out, _ = run(capsys, *ONLY_TV001, path)
    assert code == 1 and "E000" not in out
    first, source = out.splitlines()[:2]
    assert first.startswith(f"{path}:{LEAK_LINE + 2}:5: TV001 [error]")
    assert source == "        losses.append(loss)"
    path.write_bytes(b"# coding: ascii\nname = 'caf\xc3\xa9'\n")
    code, out, _ = run(capsys, path)
    assert code == 1
    assert "latin.py:2:1: E000 not ascii as its coding declaration says (byte 27)" in out
    path.write_bytes(b"# coding: klingon\nx = 1\n")
    code, out, _ = run(capsys, path)
    assert code == 1 and "E000 unknown encoding 'klingon' in its coding declaration" in out


def test_select_and_ignore(script, capsys):
    assert "TV001" not in run(capsys, "--select", "TV002", script)[1]
    assert "TV001" in run(capsys, "--select", "TV0", script)[1]
    assert "TV001" not in run(capsys, "--ignore", "tv001", script)[1]


def test_line_and_file_suppressions(script, capsys):
    script.write_text(LEAKY.replace("losses.append(loss)",
                                    "losses.append(loss)  # tvis: ignore[TV001]"))
    assert run(capsys, *ONLY_TV001, script)[0] == 0
    script.write_text(LEAKY.replace("losses.append(loss)",
                                    "losses.append(loss)  # tvis: ignore[TV002]"))
    assert run(capsys, *ONLY_TV001, script)[0] == 1
    script.write_text("# tvis: ignore-file[TV001]\n" + LEAKY)
    assert run(capsys, *ONLY_TV001, script)[0] == 0
    script.write_text(LEAKY.replace("losses.append(loss)", "losses.append(loss)  # tvis: ignore"))
    assert run(capsys, *ONLY_TV001, script)[0] == 0


def test_pyproject_config_selects_and_overrides_severity(script, tmp_path, capsys):
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[tool.tvis.check]\nseverity = { TV001 = "info" }\n')
    code, out, _ = run(capsys, *ONLY_TV001, "--fail-on", "warning", script)
    assert code == 0 and "TV001 [info]" in out
    pyproject.write_text('[tool.tvis.check]\nignore = ["TV001"]\n')
    assert run(capsys, *ONLY_TV001, script)[0] == 0
    pyproject.write_text('[tool.tvis.check]\nselect = []\n')
    code, _, err = run(capsys, script)
    assert code == 2 and "select = [] names no rule" in err
    pyproject.write_text('[tool.tvis.check]\nselct = ["TV001"]\n')
    code, _, err = run(capsys, script)
    assert code == 2 and "unknown key 'selct'" in err


def test_bad_files_get_one_line_each_and_the_rest_is_checked(script, tmp_path, capsys):
    (tmp_path / "broken.py").write_text("def f(:\n    pass\n")
    (tmp_path / "latin1.py").write_bytes("x = 'caf\xe9'\n".encode("latin-1"))
    (tmp_path / "huge.py").write_bytes(b"x = 1\n" * 400_000)
    code, out, _ = run(capsys, "--ignore", "TV001", tmp_path)
    assert code == 1, "a file that does not parse fails the check"
    code, out, _ = run(capsys, tmp_path)
    assert code == 1
    assert f"{tmp_path / 'broken.py'}:1:7: E000 syntax error: invalid syntax" in out
    assert "latin1.py:1:1: E000 not UTF-8" in out
    assert "huge.py:1:1: E000 skipped" in out
    assert "TV001" in out and out.splitlines()[-1].endswith("3 files could not be checked")


def test_a_folder_that_cannot_be_listed_is_named_not_skipped(script, tmp_path, capsys, monkeypatch):
    """Someone else's 700 folder on a shared box (chmod does not stop root, so the refusal
    is stood in for): its files were not checked, and the output must say so."""
    (tmp_path / "private").mkdir()
    (tmp_path / "private" / "leak.py").write_text(LEAKY)
    listing = os.scandir

    def scandir(path="."):
        if os.fspath(path).endswith("private"):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return listing(path)
    monkeypatch.setattr(os, "scandir", scandir)
    code, out, _ = run(capsys, "--ignore", "TV001", tmp_path)
    assert code == 1
    assert f"{tmp_path / 'private'}:1:1: E000 cannot read folder: Permission denied" in out


@pytest.mark.parametrize("source, said", [
    ('import torch\nprint "hi"\n', "2:1: E000 syntax error: Missing parentheses in call to 'print'"),
    ("import torch\n\tx = 1\n", "2:1: E000 syntax error: unexpected indent"),
    ("async = 5\n", "1:7: E000 syntax error: invalid syntax"),
    # Errors Python's compiler finds after parsing: `python` refuses the file all the same.
    ("import torch\nfor x in []:\n    pass\nbreak\n", "4:1: E000 syntax error: 'break' outside loop"),
    ("def f():\n    nonlocal n\n", "2:5: E000 syntax error: no binding for nonlocal 'n' found"),
])
def test_code_python_cannot_parse_fails_though_the_grammar_takes_it(tmp_path, capsys, source, said):
    # tree-sitter-python still parses Python 2's print statement (robustness sweep).
    path = tmp_path / "old.py"
    path.write_text(source)
    code, out, _ = run(capsys, path)
    assert code == 1 and f"old.py:{said}" in out


def test_a_notebook_s_top_level_await_is_still_checked(tmp_path, capsys):
    path = tmp_path / "exported.py"
    path.write_text("import asyncio\nawait asyncio.sleep(0)\n\n\n" + LEAKY)
    code, out, _ = run(capsys, *ONLY_TV001, path)
    assert code == 1 and "E000" not in out and "TV001" in out


def test_the_compiler_s_warnings_are_neither_printed_nor_errors(tmp_path, capsys):
    path = tmp_path / "warns.py"
    path.write_text('import re\nok = 1 is 1\npattern = re.compile("\\d+")\n\n\n' + LEAKY)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # as `python -W error -m tvis_tui ...` would
        code, out, err = run(capsys, path)
    assert code == 1 and "E000" not in out and "TV001" in out and "Warning" not in out + err


def test_valid_python_beyond_the_grammar_is_still_checked(tmp_path, capsys):
    """`return *a, *b` is valid Python that tree-sitter-python cannot parse."""
    path = tmp_path / "gap.py"
    path.write_text("def f(a):\n    return *a, *a\n\n\n" + LEAKY)
    code, out, _ = run(capsys, path)
    assert code == 1 and "E000" not in out and f"gap.py:{LEAK_LINE + 4}:5: TV001" in out


def test_huge_file_alone_is_a_notice_not_a_failure(tmp_path, capsys):
    (tmp_path / "huge.py").write_bytes(b"x = 1\n" * 400_000)
    code, out, _ = run(capsys, tmp_path)
    assert code == 0 and "E000 skipped" in out


def test_list_rules_and_explain(capsys):
    code, out, _ = run(capsys, "--list-rules")
    assert code == 0 and "TV001" in out and "memory leak" in out
    code, out, _ = run(capsys, "--explain", "tv001")
    assert code == 0 and out.startswith("TV001: ")
    for section in ("What it does:", "Why is this bad:", "Example:", "Use instead:",
                    "Known limits:"):
        assert section in out


def test_gpu_option_without_estimator_says_unavailable(script, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "tvis_tui.vram.check_hook", None)
    code, _, err = run(capsys, "--gpu", "a100-40gb", script)
    assert code == 2 and "--gpu is unavailable" in err


def test_gpu_option_adds_the_estimators_findings(script, capsys, monkeypatch):
    calls = []

    def vram_findings(paths, gpu):
        calls.append((list(paths), gpu))
        return [{"path": str(script), "line": 4, "column": 1, "rule": "TV900",
                 "severity": "error", "category": "memory", "message": "does not fit"}]

    monkeypatch.setitem(sys.modules, "tvis_tui.vram.check_hook",
                        types.SimpleNamespace(vram_findings=vram_findings))
    code, out, _ = run(capsys, *ONLY_TV001, "--format", "json", "--gpu", "h100", script)
    rules = [f["rule"] for f in json.loads(out)["findings"]]
    assert code == 1 and calls == [([str(script)], "h100")] and rules == ["TV900", "TV001"]


@pytest.mark.parametrize("verdict, severity, code", [
    ("fits", "info", 0), ("tight", "warning", 0), ("does not fit", "error", 1)])
def test_only_a_script_that_does_not_fit_fails(tmp_path, capsys, monkeypatch,
                                               verdict, severity, code):
    clean = tmp_path / "clean.py"
    clean.write_text(LEAKY.replace("losses.append(loss)", "losses.append(loss.item())"))
    finding = {"path": str(clean), "line": 4, "column": 1, "rule": "TV900",
               "severity": severity, "category": "memory", "message": f"{verdict} on H100"}
    monkeypatch.setitem(sys.modules, "tvis_tui.vram.check_hook", types.SimpleNamespace(
        vram_findings=lambda paths, gpu: [finding]))
    got, out, _ = run(capsys, "--gpu", "h100", clean)
    assert got == code and f"TV900 [{severity}] {verdict} on H100" in out


def test_unknown_gpu_names_what_check_accepts(script, capsys):
    code, out, err = run(capsys, "--gpu", "nosuch", script)
    assert code == 2 and out == ""
    assert err == "tvis: error: unknown GPU 'nosuch'; `tvis gpus` lists the known ones\n"


def test_check_runs_with_torch_unimportable(script):
    """`tvis check` must never import torch: here importing it raises."""
    code = ("import sys; sys.modules['torch'] = None\n"
            "from tvis_tui.cli import main\n"
            f"sys.exit(main(['check', '--format', 'json', {str(script)!r}]))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 1, done.stderr
    assert "TV001" in {f["rule"] for f in json.loads(done.stdout)["findings"]}
