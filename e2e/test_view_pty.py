"""``pi-workflows view`` in a real terminal: it paints the run list, ``q`` quits cleanly.

A real project with a run made by ``pi-workflows run``, then ``view`` as a
person starts it: a child on a new pty (its controlling terminal, a set
window size, ``TERM`` an xterm). The test reads the pty until the list has
painted the run's id (polling with a deadline), types ``q`` and expects
exit 0 with the terminal given back (the alternate screen left).
"""

from __future__ import annotations

import json
import os
import re
import select
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from .harness import Project
from .sessions_kit import cli_argv, pty_child
from .snippets import ONE_NODE

pytestmark = pytest.mark.slow  # a real process on a real terminal

LEAVE_ALT_SCREEN = b"\x1b[?1049l"
# Control sequences (CSI, OSC, two-byte escapes): what is left is the text drawn.
_ESCAPES = re.compile(rb"\x1b\[[0-9;?<>=]*[ -/]*[@-~]"  # CSI
                      rb"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"  # OSC
                      rb"|\x1b[@-Z\\^_=>78]")


def drawn_text(seen: bytes) -> str:
    """The characters the program drew, its control sequences taken out."""
    return _ESCAPES.sub(b"", seen).decode("utf-8", "replace")


def _read_until(master: int, seen: bytearray, done: Callable[[bytearray], bool],
                deadline: float) -> bool:
    """Read the pty into ``seen`` until ``done(seen)`` or the deadline; whether it came."""
    while not done(seen):
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        ready, _, _ = select.select([master], [], [], min(left, 0.2))
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the child closed the terminal
                return bool(done(seen))
            if not chunk:
                return bool(done(seen))
            seen += chunk
    return True


@pytest.mark.timeout(90)
def test_view_paints_the_run_list_on_a_pty_and_q_exits_0(project: Project) -> None:
    project.write_workflow("quick", ONE_NODE)
    project.cli("run", "quick")
    (run,) = [r["runId"] for r in json.loads(project.cli("list", "--json").stdout)["runs"]]
    env = {**project.env, "TERM": "xterm-256color", "COLUMNS": "120", "LINES": "30"}
    proc, master = pty_child(cli_argv(project, "view"), env, size=(30, 120))
    try:
        seen = bytearray()
        # The run's id in the list, and the footer naming the keys.
        painted = _read_until(master, seen,
                              lambda s: run in drawn_text(s) and "Quit" in drawn_text(s),
                              time.monotonic() + 45)
        if not painted:  # the whole stream, for a look at what was drawn (CI keeps it)
            where = Path(os.environ.get("PI_WORKFLOWS_ARTIFACTS") or project.root)
            where.mkdir(parents=True, exist_ok=True)
            (where / "view-pty.bin").write_bytes(bytes(seen))
        assert painted, (f"the list never showed {run}; drawn: "
                         f"{drawn_text(bytes(seen))[-3000:]!r}")
        os.write(master, b"q")
        deadline = time.monotonic() + 30
        while proc.poll() is None and time.monotonic() < deadline:
            _read_until(master, seen, lambda s: False, min(deadline, time.monotonic() + 0.2))
        assert proc.poll() == 0, (proc.returncode, bytes(seen[-2000:]))
        assert LEAVE_ALT_SCREEN in seen
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        os.close(master)
