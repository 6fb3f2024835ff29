"""Files `tvis vram` cannot estimate from: a one-line error and exit 2, never a verdict."""

from __future__ import annotations

import json
import os

import pytest

from tvis_tui.vram.check_hook import vram_findings

MODEL = """\
import torch
import torch.nn as nn
model = nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 10))
opt = torch.optim.Adam(model.parameters())
for step in range(10):
    x = torch.randn(512, 1024)
    opt.zero_grad()
    model(x).sum().backward()
    opt.step()
"""


def one_line_error(code: int, out: str, err: str) -> str:
    assert code == 2 and out == "", "an error, not a report"
    assert err.startswith("tvis: error:") and err.count("\n") == 1
    return err


@pytest.mark.parametrize("name, source, needle", [
    ("syntax.py", "import torch\nfor x in range(3:\n    pass\n",
     "syntax.py: syntax error on line 2: "),
    # tree-sitter's grammar takes these; Python does not (robustness sweep)
    ("py2.py", "import torch\nprint \"hi\"\n", "py2.py: syntax error on line 2: Missing parentheses in call to 'print'"),
    ("indent.py", "import torch\n\tx = 1\n", "indent.py: syntax error on line 2: unexpected indent"),
    # Python's compiler refuses it, past its parser: `python` would not run it either.
    ("brk.py", "import torch\nbreak\n", "brk.py: syntax error on line 2: 'break' outside loop"),
    ("latin1.py", "# café\nimport torch\n".encode("latin-1"),
     "latin1.py: not utf-8 text (byte 0xe9 on line 1); save it as UTF-8"),
    ("binary.py", b"\x7fELF\x02\x01\x01\x00\x00\x00" * 50, "binary.py: not a Python script (it contains NUL bytes)"),
    ("codec.py", "# -*- coding: nonesuch -*-\nx = 1\n", "codec.py: cannot tell its encoding"),
])
def test_unreadable_files_are_one_line_errors(write, tvis, name, source, needle):
    path = write(name, source)
    assert needle in one_line_error(*tvis("vram", path))
    assert needle in one_line_error(*tvis("vram", path, "--format", "json")), "no JSON verdict either"


@pytest.mark.parametrize("source", ["", "import torch\nprint('hello')\nx = torch.randn(3, 3)\n"])
def test_no_model_is_an_error_not_a_verdict(write, tvis, source):
    err = one_line_error(*tvis("vram", write("nomodel.py", source)))
    assert "nomodel.py: no model found in the script, so there is nothing to estimate" in err
    assert "--params N" in err


def test_params_flag_still_estimates_a_script_without_a_model(write, tvis):
    code, out, _ = tvis("vram", write("nomodel.py", ""), "--params", "1B", "--optimizer", "sgd",
                        "--format", "json")
    doc = json.loads(out)
    assert code == 0 and doc["breakdown"]["parameters"] == 4 * 10 ** 9
    assert doc["fits"] is True and doc["confidence"] == "low"


def test_a_model_built_by_unknown_code_points_to_trace(write, tvis):
    path = write("zoo_train.py", """\
        import torch
        import zoo
        model = zoo.build("my-own-net")
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for x, y in loader:
            opt.zero_grad()
            model(x).sum().backward()
            opt.step()
        """)
    err = one_line_error(*tvis("vram", path))
    assert "the model could not be followed" in err and "--params N" in err and "--trace" in err


def test_special_files_are_refused_without_reading_them(tmp_path, tvis):
    fifo = tmp_path / "fifo.py"
    os.mkfifo(fifo)  # reading it would block forever
    assert "fifo.py: not a regular file" in one_line_error(*tvis("vram", str(fifo)))
    if os.path.exists("/dev/null"):
        assert "/dev/null: not a regular file" in one_line_error(*tvis("vram", "/dev/null"))
    loop = tmp_path / "loop.py"
    loop.symlink_to(loop)
    assert "loop.py: no such file (a symbolic link to nothing" in one_line_error(*tvis("vram", str(loop)))


@pytest.mark.parametrize("name, source", [
    ("cookie.py", ("# -*- coding: latin-1 -*-\nname = 'été'\n" + MODEL).encode("latin-1")),
    ("bom.py", b"\xef\xbb\xbf" + MODEL.encode()),
    ("crlf.py", MODEL.replace("\n", "\r\n").encode()),
])
def test_encodings_python_accepts_are_estimated(write, tvis, name, source):
    code, out, _ = tvis("vram", write(name, source), "--format", "json")
    doc = json.loads(out)
    assert code == 0 and doc["confidence"] == "high"
    assert doc["breakdown"]["parameters"] == (1024 * 4096 + 4096 + 4096 * 10 + 10) * 4


def test_check_hook_skips_files_it_cannot_read(write):
    good = write("good.py", MODEL)
    bad = write("bad.py", "def broken(:\n")
    empty = write("empty.py", "")
    found = vram_findings([bad, good, empty], "a100-40gb")
    assert [f["path"] for f in found] == [good]
