"""`chat RUN` holds a parked run: a host started meanwhile does not resume it (and says
why, as `status` and `resume` do) until the chat ends; then it resumes. A chat killed
with -9 loses the hold to the host, which resumes the run.

The chat's Pi is a stand-in (``PI_WORKFLOWS_PI_BIN``): an interactive Pi needs a person
at a terminal; the stand-in is a real process on the run's session file that stays open
until the test lets it go. The run's own steps use the real Pi and the scripted model."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from .agents_kit import (
    STEP_S,
    Brain,
    Terminal,
    Turn,
    gone,
    session_file,
    submit,
    use_brain,
    wait_queue,
)
from .harness import Project, wait_for
from .scripted_model import Reply, Stall, ToolCalls

pytestmark = pytest.mark.slow  # real host, workers, Pi and chat processes

TWO = """
from pi_workflows import define_workflow, agent, edge

workflow = define_workflow(
    start_at="first",
    nodes=[agent("first", "Do the first step"), agent("second", "Do the second step")],
    edges=[edge("first", "second")],
)
"""
# Stays open (like a person in Pi) until the release file exists; says where it runs.
STAND_IN = """#!/bin/sh
echo "$$ $*" > "{marker}"
while [ ! -e "{release}" ]; do sleep 0.05; done
exit 0
"""


@contextlib.contextmanager
def _parked_in_its_second_step(project: Project, tmp_path: Path) -> Iterator[tuple[Brain, str]]:
    """A run of TWO that a host's drain parked while its second agent step streamed."""
    project.write_workflow("two", TWO)
    stall = Stall("Thinking")

    def decide(turn: Turn) -> Reply | None:
        if turn.index != 0:
            return None
        if turn.node == "second" and turn.n == 1:
            return stall
        return ToolCalls(submit(turn.attempt, {"node": turn.node}))

    with use_brain(project, tmp_path, decide) as brain:
        host = project.start_host()
        run_id = project.detach("two")
        stall.wait_reached(STEP_S)
        project.stop_host(host)  # the drain parks it in its second step
        wait_queue(project, run_id, "parked", brain=brain)
        yield brain, run_id


@pytest.mark.timeout(240)
@pytest.mark.parametrize("ending", ["leaves", "killed"])
def test_a_host_does_not_resume_a_run_while_chat_holds_it(project: Project, tmp_path: Path,
                                                          ending: str) -> None:
    with _parked_in_its_second_step(project, tmp_path) as (brain, run_id):
        assert session_file(project, run_id).is_file()

        marker, release = tmp_path / "chat-pi.txt", tmp_path / "release"
        stand_in = tmp_path / "pi-stand-in"
        stand_in.write_text(STAND_IN.format(marker=marker, release=release))
        stand_in.chmod(0o700)
        chat_env = {**project.env, "PI_WORKFLOWS_PI_BIN": str(stand_in)}
        chat = subprocess.Popen([sys.executable, "-m", "pi_workflows", "chat", run_id,
                                 "--project", str(project.root)], env=chat_env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)
        try:
            wait_for(marker.exists, timeout=30, what="the chat's Pi to start",
                     diag=lambda: chat.stderr.read().decode() if chat.poll() is not None
                     else "")
            pi_pid = int(marker.read_text().split()[0])
            row = project.row(run_id)
            assert row.state == "starting" and str(row.runner_id).startswith("chat-")

            host = project.start_host(log="host2.log")
            line = f"run {run_id} waits: held by chat (pid {chat.pid}) since "
            wait_for(lambda: line in host.log_text(), timeout=30, what="the host's log line",
                     diag=host.log_text)
            status = json.loads(project.cli("status", run_id, "--json").stdout)
            assert status["heldBy"]["pid"] == chat.pid, status
            assert f"held by chat (pid {chat.pid}) since" in project.cli("status",
                                                                         run_id).stdout
            second = project.cli("chat", run_id, check=False)  # one writer: no second chat
            assert second.returncode == 2 and f"held by chat (pid {chat.pid})" in second.stderr
            refused = project.cli("resume", run_id, check=False)
            assert refused.returncode == 2 and "held by chat" in refused.stderr
            # The host saw it and left it alone: no worker resumed the run.
            assert not [e for e in project.events(run_id) if e["type"] == "run_resumed"]
            assert project.row(run_id).runner_id == row.runner_id

            if ending == "leaves":
                release.touch()
                assert chat.wait(30) == 0
            else:
                os.kill(chat.pid, signal.SIGKILL)
                chat.wait(10)
                # Its Pi goes with it (PDEATHSIG): no second writer of the conversation.
                wait_for(lambda: gone(psutil.Process(pi_pid)) if psutil.pid_exists(pi_pid)
                         else True, timeout=10, what="the chat's Pi to stop")
            wait_queue(project, run_id, "done", brain=brain)
            state = project.state(run_id)
            assert state["status"] == "completed", state
            assert state["finalOutput"] == {"node": "second"}
            (resumed,) = [e for e in project.events(run_id) if e["type"] == "run_resumed"]
            assert resumed["payload"]["resumePoint"] == "second"
            project.stop_host(host)
        finally:
            release.touch()
            if chat.poll() is None:
                os.killpg(chat.pid, signal.SIGKILL)
            chat.wait(10)


@pytest.mark.timeout(240)
def test_a_real_chat_on_a_terminal_holds_the_run_until_the_terminal_closes(
        project: Project, tmp_path: Path) -> None:
    """The real interactive Pi on a pty: the host waits while it is open; closing the
    terminal (SIGHUP to chat and Pi) ends the chat, gives the run back, and it resumes."""
    with _parked_in_its_second_step(project, tmp_path) as (brain, run_id):

        term = Terminal(project, "chat", run_id)
        try:
            term.wait_text("Accepted: the step is complete.")  # Pi shows the conversation
            row = project.row(run_id)
            assert row.state == "starting" and str(row.runner_id).startswith("chat-")
            host = project.start_host(log="host2.log")
            wait_for(lambda: f"run {run_id} waits: held by chat (pid {term.proc.pid})"
                     in host.log_text(), timeout=30, what="the host's log line",
                     diag=host.log_text)
            assert project.row(run_id).runner_id == row.runner_id
            term.hang_up()
            term.proc.wait(30)
            wait_queue(project, run_id, "done", brain=brain)
            assert project.state(run_id)["status"] == "completed"
            project.stop_host(host)
        finally:
            term.close()
