"""The verdict as a `tvis check --gpu` finding."""

from __future__ import annotations

import pytest

from tvis_tui.errors import TvisError
from tvis_tui.vram.check_hook import vram_findings


def test_findings_shape_and_severity(script, tmp_path):
    plain = tmp_path / "util.py"
    plain.write_text("def add(a, b):\n    return a + b\n")
    found = vram_findings([script("gpt_sdpa"), str(plain)], "rtx3060")
    assert len(found) == 1
    f = found[0]
    assert set(f) == {"path", "line", "column", "end_column", "rule", "severity", "category",
                      "message"}
    assert (f["rule"], f["category"], f["severity"], f["line"]) == ("TV900", "memory", "info", 100)
    assert f["message"].startswith("fits on NVIDIA GeForce RTX 3060 12GB: estimated peak")


def test_does_not_fit_is_an_error_with_the_biggest_saving(fixture):
    f = vram_findings([fixture("big_lm")], "a100-40gb")[0]
    assert f["severity"] == "error" and f["line"] == 40
    assert f["message"].startswith("does not fit on NVIDIA A100 40GB: estimated peak")
    assert "biggest saving:" in f["message"] and "saves" in f["message"]


def test_unknown_gpu_raises_one_line_error(script):
    with pytest.raises(TvisError, match="unknown GPU 'nope'"):
        vram_findings([script("mlp")], "nope")


def test_caret_spans_the_code_of_the_line(tmp_path, capsys):
    from tvis_tui.cli import main

    train = tmp_path / "train.py"
    train.write_text("import torch\nfrom torch import nn\nmodel = nn.Linear(4, 1)\n"
                     "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                     "for step in range(3):\n"
                     "\tloss = model(torch.randn(8, 4)).pow(2).mean()  \n"
                     "\topt.zero_grad()\n\tloss.backward()\n\topt.step()\n")
    main(["check", "--gpu", "a100-40gb", str(train)])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"{train}:6:2: TV900 [info] fits on")
    assert lines[1].rstrip() == "     loss = model(torch.randn(8, 4)).pow(2).mean()"
    assert lines[2] == "     " + "^" * len("loss = model(torch.randn(8, 4)).pow(2).mean()")


def test_a_script_the_estimator_fails_on_says_so_and_hides_no_other(fixture, tmp_path, monkeypatch):
    """Sweep V: one script the estimator crashed on made `tvis check --gpu t4 .` print a
    traceback and no finding at all."""
    import tvis_tui.vram.check_hook as hook

    broken = tmp_path / "broken.py"
    broken.write_text("import torch\n")
    real = hook.estimate

    def estimate(path, settings=None):
        if str(path) == str(broken):
            raise TypeError("boom")
        return real(path, settings)

    monkeypatch.setattr(hook, "estimate", estimate)
    found = vram_findings([str(broken), fixture("big_lm")], "a100-40gb")
    assert [(f["path"], f["severity"], f["line"]) for f in found] == [
        (str(broken), "info", 1), (fixture("big_lm"), "error", 40)]
    assert found[0]["message"] == ("no estimate: internal error in the VRAM estimator: TypeError: boom "
                                   "(please report it)")
