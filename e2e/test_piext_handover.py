"""Seed 000's acceptance criteria 1 and 2 with in-session agent steps, in a real Pi (RPC mode,
the scripted model): Pi closed while the session's own conversation is mid-response in an
agent step hands the step over (the run parks at that node, no terminal event); a running
host resumes it with a new attempt in a headless Pi, and the reopened session catches up
and talks about the result; without a host, the reopened session resumes the node in its
own conversation and completes."""

from __future__ import annotations

import os
import signal
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from .agents_kit import all_text, attempts_seen
from .harness import Project, alive, wait_for
from .pi_env import PiRpc
from .piext_kit import (
    STEP_S,
    ExtensionDrill,
    activations,
    custom,
    extension_drill,
    session_file,
    start,
    started_run,
    step_attempt,
    submit_step,
    text_of,
)
from .scripted_model import Reply, Request, Stall, Text, ToolCalls, message_text
from .sessions_kit import query
from .test_piext_insession import ASK

pytestmark = pytest.mark.slow  # real processes: an e2e drill


_answer = submit_step({"answer": "teal"})


def _brain(stall: Stall) -> Callable[[Request], Reply | None]:
    """The model, by what the request holds: starts the run, stalls in the step's first
    attempt, submits in a retry, and talks about the result when asked."""
    def decide(request: Request) -> Reply | None:
        last = request.messages[-1] if request.messages else {}
        text = all_text(request)
        if last.get("role") == "tool":
            return Text("Queued." if "queued" in message_text(last) else "Done.")
        if "what happened?" in message_text(last):
            return Text("The run finished: the colour is teal.")
        if not attempts_seen(request):
            return ToolCalls(start("ask", task="the sea"))
        return _answer(request) if "This is a retry" in text else stall

    return decide


def _state(project: Project, run: str) -> str:
    rows = query(project, "SELECT state FROM workflow_run_queue WHERE run_id = ?", (run,))
    return str(rows[0]["state"]) if rows else ""


def _feed(project: Project, run: str) -> list[str]:
    return [str(r["type"]) for r in query(
        project, "SELECT type FROM run_events WHERE run_id = ? ORDER BY seq", (run,))]


def _started(project: Project, run: str) -> Counter[str]:
    return Counter(str(e["nodeId"]) for e in project.events(run) if e["type"] == "node_started")


def _via(project: Project, run: str) -> list[str]:
    return [str(e["payload"].get("via")) for e in project.events(run)
            if e["type"] == "agent_prompt_sent"]


def _mid_step(drill: ExtensionDrill, stall: Stall) -> tuple[PiRpc, str, str]:
    """A Pi whose run is in its agent step, the model mid-response in this conversation."""
    pi = drill.open()
    told = pi.request({"type": "prompt", "message": "Remember PELICAN. Run ask about the sea."})
    assert told["success"]
    stall.wait_reached(STEP_S)
    run = started_run(pi)
    assert run is not None
    assert _via(drill.project, run) == ["session"]
    return pi, run, session_file(pi)


def _reports(pi: PiRpc) -> list[str]:
    return [text_of(m) for m in custom(pi) if (m.get("details") or {}).get("kind") == "report"]


def _use_one_agent_dir(drill: ExtensionDrill) -> None:
    # The host's headless Pi uses the same scripted provider as the user's Pi.
    agent_dir = str(drill.pi_env.agent_dir)
    drill.project.env["PI_WORKFLOWS_PI_AGENT_DIR"] = agent_dir
    drill.pi_env.env["PI_WORKFLOWS_PI_AGENT_DIR"] = agent_dir


@pytest.mark.timeout(240)
def test_criterion_1_pi_closed_mid_response_the_host_resumes_and_the_reopened_pi_talks_about_it(
        project: Project, tmp_path: Path) -> None:
    project.write_workflow("ask", ASK)
    stall = Stall("Let me think about", " colours", timeout=120)
    with extension_drill(project, _brain(stall), tmp_path / "pi") as drill:
        _use_one_agent_dir(drill)
        project.start_host()
        pi, run, session = _mid_step(drill, stall)
        [runner] = activations(project)
        pi.close()  # the window closes while the model is mid-response in the step
        assert stall.wait_done(STEP_S) == "disconnected"
        wait_for(lambda: not alive(runner.pid), STEP_S, what="the session runner to exit")
        wait_for(lambda: _state(project, run) == "done", 90, what="the host to finish the run",
                 diag=lambda: project.cli("status", run, check=False).stdout
                 + drill.model.describe()
                 + "\n".join(str(r.texts("tool")) for r in drill.model.completions))
        feed = _feed(project, run)
        assert "parked" in feed and feed.count("done") == 1, feed
        # The host resumed the node with a new attempt, in a headless Pi of its own.
        assert _started(project, run) == Counter({"prepare": 1, "ask": 2, "finish": 1})
        assert _via(project, run) == ["session", "headless"]
        resumed = next(r for r in drill.model.completions if "This is a retry" in all_text(r))
        assert "PELICAN" not in all_text(resumed)
        assert "This is a retry" in all_text(resumed)
        assert "Name a colour for the sea" in all_text(resumed)
        # Reopened: the catch-up says what happened, and the user talks about it.
        reopened = drill.reopen(session)
        wait_for(lambda: _reports(reopened), STEP_S, what="the catch-up",
                 diag=reopened.diagnose)
        [report] = _reports(reopened)
        assert f"run {run} (ask) completed" in report and "teal" in report, report
        assert reopened.request({"type": "prompt", "message": "what happened?"})["success"]
        reopened.read_until("agent_end", STEP_S)
        assert any(report in t for t in drill.model.completions[-1].texts("user"))
        drill.check()


@pytest.mark.timeout(240)
def test_criterion_2_kill_9_of_pi_mid_response_no_host_the_reopened_pi_resumes_the_step_itself(
        project: Project, tmp_path: Path) -> None:
    project.write_workflow("ask", ASK)
    stall = Stall("Let me think about", " colours", timeout=120)
    with extension_drill(project, _brain(stall), tmp_path / "pi") as drill:
        pi, run, session = _mid_step(drill, stall)
        [runner] = activations(project)
        pi.proc.kill()  # SIGKILL: no session_shutdown
        pi.proc.wait(10)
        pi.close()
        wait_for(lambda: _state(project, run) == "parked", STEP_S, what="the run parked")
        wait_for(lambda: not alive(runner.pid), STEP_S, what="the session runner to exit")
        assert "done" not in _feed(project, run)
        reopened = drill.reopen(session)
        wait_for(lambda: _state(project, run) == "done", 90, what="the reopened Pi to finish",
                 diag=reopened.diagnose)
        assert _started(project, run) == Counter({"prepare": 1, "ask": 2, "finish": 1})
        # The new attempt happened in the reopened session's own conversation.
        assert _via(project, run) == ["session", "session"]
        retry = next(r for r in drill.model.completions if "This is a retry" in all_text(r))
        assert "This is a retry" in all_text(retry)
        steps_shown = [m for m in custom(reopened)
                       if (m.get("details") or {}).get("kind") == "step"]
        assert len(steps_shown) == 2  # the first attempt's, kept in the session, and the retry
        assert steps_shown[1]["details"]["attempt"] == step_attempt(retry)
        status = project.cli("status", run, "--json").stdout
        assert '"teal"' in status
        drill.check()


@pytest.mark.timeout(240)
def test_a_claim_lost_mid_step_owes_the_session_one_turn_saying_the_step_is_not_its_own(
        project: Project, tmp_path: Path) -> None:
    project.env["PI_WORKFLOWS_LEASE_MS"] = "3000"
    project.env["PI_WORKFLOWS_RENEW_MS"] = "500"
    project.write_workflow("ask", ASK)
    stall = Stall("Let me think about", " colours", timeout=120)
    brain = _brain(stall)

    def decide(request: Request) -> Reply | None:
        if "not yours to answer" in message_text(request.messages[-1]):
            return Text("Understood: the host has that step now.")
        return brain(request)

    with extension_drill(project, decide, tmp_path / "pi") as drill:
        _use_one_agent_dir(drill)
        pi, run, _ = _mid_step(drill, stall)
        [worker] = [p for p in project.state_processes(run) if p["role"] == "worker"]
        os.kill(worker["pid"], signal.SIGSTOP)  # frozen: its lease runs out
        try:
            project.start_host()
            wait_for(lambda: _state(project, run) == "done", 90,
                     what="the host to take the run over and finish it")
        finally:
            os.kill(worker["pid"], signal.SIGCONT)
        # The thawed worker finds its claim gone, and the session is owed one turn.
        wait_for(lambda: not alive(worker["pid"]), STEP_S, what="the thawed worker to exit")
        stall.release()  # the session's own turn ends; the follow-up comes at the boundary
        told = wait_for(lambda: [m for m in custom(pi) if (m.get("details") or {}).get(
            "intentId")], STEP_S, what="the claim-lost follow-up", diag=pi.diagnose)
        assert len(told) == 1 and "not yours to answer" in text_of(told[0]), told
        wait_for(lambda: [r for r in drill.model.completions
                          if "not yours to answer" in message_text(r.messages[-1])],
                 STEP_S, what="the model's turn about it")
        feed = _feed(project, run)
        assert feed.count("done") == 1, feed
        assert _via(project, run) == ["session", "headless"]
        pi.request({"type": "prompt", "message": "/workflow status"})
        assert len([m for m in custom(pi) if (m.get("details") or {}).get("intentId")]) == 1
        drill.check()
