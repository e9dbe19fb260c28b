"""The command line's error contract: a full disk is one line and exit 6, a reader that
went away exit 141 and nothing said; never a traceback."""

from __future__ import annotations

import errno

import pytest
from pi_workflows.supervisor.cli.exits import exit_for

pytestmark = pytest.mark.timeout(10)


def test_a_full_disk_is_one_line_and_exit_6_not_an_internal_error(
        capsys: pytest.CaptureFixture[str]) -> None:
    full = OSError(errno.ENOSPC, "No space left on device", "/runs/r1/.state.json.1.tmp")
    assert exit_for(full, debug=False) == 6
    [line] = capsys.readouterr().err.splitlines()
    assert line == ("pi-workflows: error: the disk is full (No space left on device writing"
                    " /runs/r1/.state.json.1.tmp): free some space, then try again")
    assert exit_for(OSError(errno.EDQUOT, "Disk quota exceeded"), debug=False) == 6
    assert exit_for(OSError(errno.EIO, "Input/output error"), debug=False) == 70  # a bug still


def test_a_reader_that_went_away_is_exit_141_and_nothing_said(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A caller that stopped reading (a pipe's `head`, a Pi that shut down while a
    call was writing): no "internal error", and stdout pointed away from the pipe."""
    import os
    import sys
    moved: list[tuple[int, int]] = []

    class Pipe:  # the standard output whose reader left (fd 99 here)
        def fileno(self) -> int:
            return 99

    monkeypatch.setattr(os, "dup2", lambda a, b: moved.append((a, b)))
    monkeypatch.setattr(sys, "stdout", Pipe())
    assert exit_for(BrokenPipeError(32, "Broken pipe"), debug=False) == 141
    assert capsys.readouterr().err == ""
    assert [b for _, b in moved] == [99]
