"""The command line's error contract for a full disk: one line, exit 6, no traceback."""

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
