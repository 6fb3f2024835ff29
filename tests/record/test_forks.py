"""A fork of the recording process knows it is one, without asking the kernel each time."""

from __future__ import annotations

import os

import pytest

from tvis_tui.record import forks


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_is_a_later_generation():
    before = forks.generation()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child reports its generation and leaves at once
        os.write(write, str(forks.generation()).encode())
        os._exit(0)
    os.close(write)
    child = int(os.read(read, 32))
    os.waitpid(pid, 0)
    assert forks.generation() == before
    assert child == before + 1
