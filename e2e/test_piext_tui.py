"""Escape during an in-session agent step, in the interactive TUI of a real Pi on a pty
(the scripted model): the model starts a run, the footer and the per-node widget show
it running at its agent node; Escape while the step's response streams holds the step
(the footer says so); `/workflow resume` typed in the editor delivers it again, the
model submits and the footer shows the run completed. The RPC version, with the
conversation's messages checked, is ``e2e/test_piext_hold.py``."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import select
import signal
import struct
import subprocess
import termios
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .agents_kit import ESCAPES, all_text, attempts_seen
from .harness import HarnessError, Project, wait_for
from .pi_env import RPC_FLAGS, pi_binary
from .piext_kit import (
    STEP_S,
    extension_path,
    kill_activations,
    pi_env_for,
    start,
    steps,
    submit_step,
)
from .scripted_model import ScriptedModel, Stall, Text, ToolCalls

pytestmark = pytest.mark.slow  # real processes: an e2e drill

ROWS, COLS = 40, 160
ESCAPE, ENTER = b"\x1b", b"\r"
HELD = "held: /workflow resume delivers the step again"
FOOTER = re.compile(r"workflow ask: [a-z_]+(?: at [a-z_]+)?(?: \(\w+\))?(?: " + HELD + ")?")

ASK = '''
from pi_workflows import agent, compute, define_workflow, edge

workflow = define_workflow(
    start_at="prepare",
    nodes=[
        compute("prepare", lambda ctx: {"topic": ctx.input.get("task", "")}),
        agent("ask", lambda ctx: "Name a colour for " + ctx.outputs["prepare"]["topic"],
              expected_output={"type": "object", "required": ["answer"],
                               "properties": {"answer": {"type": "string"}}}),
        compute("finish", lambda ctx: {"answer": ctx.outputs["ask"]["answer"]}),
    ],
    edges=[edge("prepare", "ask"), edge("ask", "finish")],
)
'''


class PiTerminal:
    """Interactive ``pi`` (no ``--mode rpc``) on a new pty of ROWS x COLS, as a person
    runs it: the pty is its controlling terminal; what it draws is kept, and read back
    with the escape sequences left out."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))

        def take_terminal() -> None:  # in the child, after setsid()
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        self.proc = subprocess.Popen(argv, cwd=cwd, env={**env, "TERM": "xterm-256color"},
                                     stdin=slave, stdout=slave, stderr=slave,
                                     start_new_session=True, preexec_fn=take_terminal)
        os.close(slave)
        self._master: int | None = master
        self._out = bytearray()
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._pump, daemon=True, name="pi-pty")
        self._reader.start()

    def _pump(self) -> None:
        fd = self._master
        assert fd is not None
        while True:
            try:
                ready, _, _ = select.select([fd], [], [], 0.05)
                if not ready:
                    if self.proc.poll() is not None:
                        return
                    continue
                chunk = os.read(fd, 65536)
            except (OSError, ValueError):  # EIO: the child side is gone
                return
            if not chunk:
                return
            with self._cond:
                self._out.extend(chunk)
                self._cond.notify_all()

    @property
    def mark(self) -> int:
        """Where the output is now: ``wait_text(..., since=mark)`` looks only after it."""
        with self._cond:
            return len(self._out)

    def text(self, since: int = 0) -> str:
        with self._cond:
            raw = bytes(self._out[since:])
        return ESCAPES.sub("", raw.decode(errors="replace"))

    def wait_text(self, text: str, since: int = 0, timeout: float = STEP_S) -> None:
        deadline = time.monotonic() + timeout
        with self._cond:
            while text not in self.text(since):
                left = deadline - time.monotonic()
                if left <= 0 or self.proc.poll() is not None:
                    raise HarnessError(f"no {text!r} on Pi's terminal after {timeout:g} s"
                                       f" (exit {self.proc.poll()}); it shows:\n"
                                       f"{self.text(since)[-4000:]}")
                self._cond.wait(min(left, 0.5))

    def type(self, data: bytes) -> None:
        assert self._master is not None
        os.write(self._master, data)

    def close(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(10)
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        self._reader.join(5)
        if self._master is not None:
            os.close(self._master)
            self._master = None


@contextlib.contextmanager
def pi_on_pty(project: Project, model: ScriptedModel, root: Path) -> Iterator[PiTerminal]:
    """``pi -e <extension>`` in the project, isolated and offline, on the scripted model."""
    env = pi_env_for(project, model, root)
    flags = [f for f in RPC_FLAGS if f not in ("--mode", "rpc")]
    argv = [str(pi_binary()), *flags, "-e", str(extension_path()),
            "--session-dir", str(env.agent_dir / "sessions")]
    term = PiTerminal(argv, env.env, env.cwd)
    try:
        yield term
    finally:
        with contextlib.ExitStack() as stack:
            stack.callback(kill_activations, project)
            stack.callback(term.close)


def footers(text: str) -> list[str]:
    """The footer statuses in ``text``, in the order Pi drew them."""
    return FOOTER.findall(text)


def _status(project: Project, run: str) -> dict[str, Any]:
    return dict(json.loads(project.cli("status", run, "--json").stdout))


def _only_run(project: Project) -> str | None:
    runs = json.loads(project.cli("list", "--json").stdout)["runs"]
    return str(runs[0]["runId"]) if runs else None


@pytest.mark.timeout(180)
def test_escape_in_the_tui_holds_the_step_and_workflow_resume_delivers_it_again(
        project: Project, tmp_path: Path) -> None:
    project.write_workflow("ask", ASK)
    stall = Stall("Let me think", timeout=120.0)
    right = submit_step({"answer": "amber"})

    script = steps(ToolCalls(start("ask", task="autumn")), Text("Queued."), stall, right)
    with ScriptedModel(script) as model, pi_on_pty(project, model, tmp_path / "pi") as term:
        term.wait_text("scripted-model")  # the editor and its footer are drawn
        term.type(b"run ask")
        term.type(ENTER)
        run = wait_for(lambda: _only_run(project), STEP_S, what="the queued run",
                       diag=lambda: term.text()[-4000:])
        # The step's response streams: the footer and the widget show the run at its node.
        stall.wait_reached(STEP_S)
        term.wait_text("workflow ask: running at ask")
        term.wait_text("Let me think")
        term.wait_text(f"pi-workflows  run {run}  ask  running")
        for line in ("✓ prepare", "▶ ask", "· finish"):
            term.wait_text(line)

        # Escape stops the response and holds the step: no reminder, the run stays at ask.
        escaped = term.mark
        term.type(ESCAPE)
        assert stall.wait_done(STEP_S) == "disconnected"
        term.wait_text(HELD, since=escaped)
        status = _status(project, run)
        assert (status["queueState"], status["currentNode"]) == ("running", "ask"), status

        # `/workflow resume` as the footer says it, then one Enter (a word typed in full
        # is not offered as a completion, which Enter would take instead).
        mark = term.mark
        term.type(b"/workflow resume")
        term.wait_text("/workflow resume", since=mark)
        term.type(ENTER)
        term.wait_text("Delivering step ask of run", since=mark)
        term.wait_text("workflow ask: completed", since=mark)
        term.wait_text("✓ ask", since=mark)
        term.wait_text("✓ finish", since=mark)
        shown = footers(term.text(escaped))
        assert shown[0].startswith("workflow ask: running at ask"), shown
        assert any(f.endswith(HELD) for f in shown), shown  # until the step came again
        assert shown[-1].startswith("workflow ask: completed") and HELD not in shown[-1], shown

        status = _status(project, run)
        assert status["runStatus"] == "completed", status
        assert status["finalOutput"] == {"answer": "amber"}
        # What the model was sent after the resume: the step message twice (the same
        # attempt), and no reminder.
        after = all_text(model.completions[3])
        assert after.count("Name a colour for autumn") == 2, after
        assert "ended your turn without an accepted submission" not in after
        [attempt] = set(attempts_seen(model.completions[3]))
        assert attempts_seen(model.completions[2]) == [attempt]
        sent = [e for e in project.events(run) if e["type"] == "agent_prompt_sent"]
        assert [e["payload"]["via"] for e in sent] == ["session", "session"]
        assert len(model.completions) == 4
    model.check()
