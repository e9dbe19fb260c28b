"""The live view and the step logs over a bundle written by hand, event by event."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from pi_workflows.protocol.bundle import Bundle
from pi_workflows.supervisor.views.follower import TraceFollower
from pi_workflows.supervisor.views.steplogs import INTERRUPTED, read_steps
from pi_workflows.supervisor.views.wording import duration_text, error_text, person_text
from rich.console import Console

from tests.helpers.clocks import FakeClock

ESC = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
NODES = [{"id": "build", "kind": "shell"}, {"id": "think", "kind": "agent"},
         {"id": "tell", "kind": "notify"}, {"id": "ask", "kind": "checkpoint"},
         {"id": "never", "kind": "compute"}]


class Run:
    """A bundle grown by hand, as a worker would write it."""

    def __init__(self, root: Path, run_id: str = "r1") -> None:
        self.bundle = Bundle(root, run_id)
        self.bundle.session_dir.mkdir(parents=True)
        self.bundle.workflow_path.write_text(json.dumps({"name": "wf", "nodes": NODES}))
        self.seq = 0
        self.state({"status": "running"})

    def state(self, state: dict[str, Any]) -> None:
        self.bundle.state_path.write_text(json.dumps({**state, "traceSeq": self.seq}))

    def event(self, kind: str, at: int, node: str | None = None, attempt: str | None = None,
              **payload: Any) -> None:
        self.seq += 1
        event = {"seq": self.seq, "at": at, "type": kind, "runId": "r1", "payload": payload}
        if node:
            event.update(nodeId=node, attemptId=attempt or f"{node}-a")
        with open(self.bundle.trace_path, "a") as fh:
            fh.write(json.dumps(event) + "\n")
        self.state({"status": "running", "currentAttempt": attempt or f"{node}-a"})

    def line(self, path: Path, **record: Any) -> None:
        with open(path, "a") as fh:
            fh.write(json.dumps(record) + "\n")


def _view(clock: FakeClock[int]) -> tuple[Any, io.StringIO]:
    from pi_workflows.supervisor.views.live import LiveView

    out = io.StringIO()
    console = Console(file=out, force_terminal=True, force_interactive=True, width=100,
                      color_system=None, highlight=False)
    return LiveView(console=console, clock=clock), out


def _text(out: io.StringIO) -> str:
    return ESC.sub("", out.getvalue()).replace("\r", "")


@pytest.mark.timeout(20)
def test_the_live_view_ticks_streams_output_and_agent_text_then_says_what_failed(
        tmp_path: Path) -> None:
    run, clock = Run(tmp_path), FakeClock(0)
    view, out = _view(clock)
    follower = TraceFollower(run.bundle)
    run.event("run_started", 1000, workflow="wf")
    run.event("node_started", 1000, "build", step=1)
    run.line(run.bundle.output_path, at=1100, nodeId="build", attemptId="build-a",
             stream="stdout", text="compiling\nlinking ha")
    clock.now = 2500
    view.show(follower)
    first = _text(out)
    assert re.search(r"● build\s+running\s+1\.5 s", first), first
    assert "compiling" in first and "linking ha" in first  # a partial line shows too
    clock.now = 3700
    view._drawn = 0.0  # the next poll, past the redraw interval
    view.show(follower)
    assert re.search(r"● build\s+running\s+2\.7 s", _text(out)[len(first):])
    run.event("node_finished", 4000, "build", output={"exitCode": 0, "stdout": "x",
                                                      "stderr": "", "truncated": False},
              result={"outcome": "ok"}, next="think")
    run.event("node_started", 4000, "think", step=2)
    run.line(run.bundle.session_dir / "events.ndjson", at=4100, nodeId="think",
             attemptId="think-a", kind="text", text="Reading the plan now")
    run.event("effect_recorded", 4200, "think", effect="indeterminate", effectKey="step-2")
    clock.now = 4300
    view._drawn = 0.0
    view.show(follower)
    text = _text(out)
    assert "Reading the plan now" in text
    assert "may or may not have taken effect" in text and "effect indeterminate" not in text
    run.event("node_failed", 5000, "think", next=None,
              result={"outcome": "failed", "errorCode": "effect_indeterminate",
                      "error": "an earlier attempt was interrupted"})
    run.event("run_failed", 5000, error={"code": "effect_indeterminate", "message": "no"})
    run.state({"status": "failed", "updatedAt": 5000,
               "error": {"code": "effect_indeterminate", "message": "node 'think': no"}})
    view.end(follower, None)
    view.close()
    text = _text(out)
    assert "✗ think failed after 1.0 s" in text
    assert re.search(r"– never\s+skipped", text) and re.search(r"✓ build\s+done\s+3\.0 s", text)
    assert "see its output: pi-workflows logs r1 think" in text
    assert "run it again from there: pi-workflows fork r1" in text


@pytest.mark.timeout(20)
def test_a_notify_message_is_text_and_a_checkpoint_names_the_answer_command(
        tmp_path: Path) -> None:
    run, clock = Run(tmp_path), FakeClock(0)
    view, out = _view(clock)
    follower = TraceFollower(run.bundle)
    run.event("run_started", 0, workflow="wf")
    run.event("node_started", 0, "tell", step=1)
    run.event("node_finished", 10, "tell", next="ask", result={"outcome": "ok"},
              output={"kind": "progress", "message": "the build is ready"})
    run.event("node_started", 10, "ask", step=2)
    run.event("run_waiting", 10, "ask", waitingNode="ask", output={"summary": "ship it?"})
    run.state({"status": "waiting", "waitingNode": "ask", "updatedAt": 10,
               "waitingOutput": {"summary": "ship it?"}})
    view.end(follower, None)
    text = _text(out)
    assert "» the build is ready" in text and '"message"' not in text
    assert "? waiting for an answer at ask" in text and "ship it?" in text
    assert 'answer it: pi-workflows answer r1 "your answer"' in text
    assert re.search(r"· never\s+pending", text) and "skipped" not in text


@pytest.mark.timeout(20)
def test_a_wait_closed_by_cancel_ends_cancelled_with_no_answer_command(
        tmp_path: Path) -> None:
    run, clock = Run(tmp_path), FakeClock(0)
    view, out = _view(clock)
    follower = TraceFollower(run.bundle)
    run.event("run_started", 0, workflow="wf")
    run.event("node_started", 0, "ask", step=1)
    run.event("run_waiting", 10, "ask", waitingNode="ask", output={"summary": "ship it?"})
    run.state({"status": "waiting", "waitingNode": "ask", "updatedAt": 10,
               "waitingOutput": {"summary": "ship it?"}})
    closed = SimpleNamespace(state="done", cancel_requested=True)  # the row, as close_wait left it
    view.end(follower, closed)
    text = _text(out)
    assert "cancelled while it waited at ask" in text
    assert "pi-workflows answer" not in text and "waiting for an answer" not in text


@pytest.mark.timeout(20)
def test_step_logs_resolve_artifacts_and_mark_a_cut_off_attempt(tmp_path: Path) -> None:
    run = Run(tmp_path)
    big = "line\n" * 2000
    ref = run.bundle.artifacts.put(big)
    run.event("run_started", 0, workflow="wf")
    run.event("node_started", 0, "build", "build-1", step=1)
    run.line(run.bundle.output_path, at=5, nodeId="build", attemptId="build-1",
             stream="stdout", text="half")
    run.event("run_resumed", 50, boundary=True, resumePoint="build")
    run.event("node_started", 60, "build", "build-2", step=1, rerun=True)
    run.event("node_finished", 90, "build", "build-2", result={"outcome": "ok"},
              output={"exitCode": 0, "stdout": ref, "stderr": "", "truncated": False})
    first, second = read_steps(run.bundle)
    assert (first.outcome, first.stream_text("stdout")) == (INTERRUPTED, "half")
    assert second.output["stdout"] == big and second.ended_at == 90


def test_plain_words() -> None:
    assert [duration_text(ms) for ms in (400, 12_345, 125_000, 3_725_000)] == [
        "0.4 s", "12.3 s", "2 min 05 s", "1 h 02 min"]
    assert person_text({"kind": "final", "message": "all built"}) == "all built"
    assert person_text({"exitCode": 0, "stdout": "ok\n", "stderr": "", "truncated": False}) \
        == "ok"
    assert error_text("node_timed_out", "the node did not finish within 3 s") == \
        "the node did not finish within 3 s [node_timed_out]"
    assert error_text("effect_indeterminate", "node 'pay': an earlier attempt of this effect"
                      " was interrupted") == ("node 'pay': it was interrupted earlier while it"
                                              " ran and may or may not have taken effect; it"
                                              " is not marked idempotent, so it was not run"
                                              " again [effect_indeterminate]")
    from pi_workflows.supervisor.views.live import _clean

    # A progress bar and colours stay out of the view's layout; a CRLF line stays.
    assert _clean("10%\r50%\r\x1b[32mdone\x1b[0m\x07 ok") == "done ok"
    assert _clean("windows line\r") == "windows line"


@pytest.mark.timeout(60)
def test_the_cli_starts_without_rich_and_a_pipe_gets_the_plain_view() -> None:
    code = ("import sys\n"
            "from pi_workflows.supervisor.cli import app\n"
            "from pi_workflows.supervisor.views import runview\n"
            "from pathlib import Path\n"
            "with runview.terminal_view(print, project=Path('.')) as view:\n"
            "    kind = type(view).__name__\n"
            "print(kind, 'rich' in sys.modules)\n")
    env = {k: v for k, v in os.environ.items() if k != "PI_WORKFLOWS_PLAIN"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, stdin=subprocess.DEVNULL, timeout=50, check=True)
    assert done.stdout.split() == ["PlainView", "False"]


@pytest.mark.timeout(20)
def test_output_past_the_live_cap_names_the_exact_logs_command(tmp_path: Path) -> None:
    run, clock = Run(tmp_path), FakeClock(0)
    view, out = _view(clock)
    follower = TraceFollower(run.bundle)
    run.event("run_started", 1000, workflow="wf")
    run.event("node_started", 1000, "build", step=1)
    run.line(run.bundle.output_path, at=1100, nodeId="build", attemptId="build-a",
             stream="stdout", truncated=True)
    clock.now = 1200
    view.show(follower)
    assert "`pi-workflows logs r1 build` has what the step kept" in _text(out)
