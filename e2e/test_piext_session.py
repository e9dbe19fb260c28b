"""The Pi extension across a Pi session's life, in a real Pi (RPC mode, the scripted
model): closing Pi mid-run parks the run and a host finishes it, and the reopened
session catches up once and talks about the result; ``kill -9`` of Pi parks the run
too (the session runner's stdin lifeline); a checkpoint answered with ``/workflow
answer`` runs its continuation on the host, and the model is told the result."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

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
    steps,
    text_of,
    ui,
    wait_status,
)
from .scripted_model import Text, ToolCalls
from .sessions_kit import FLOW, query

pytestmark = pytest.mark.slow  # real processes: an e2e drill


def _run_id(pi: PiRpc) -> str:
    ends = [e for e in pi.events if e.get("type") == "tool_execution_end"]
    return str(ends[0]["result"]["details"]["runId"])


def _state(project: Project, run: str) -> str:
    rows = query(project, "SELECT state FROM workflow_run_queue WHERE run_id = ?", (run,))
    return str(rows[0]["state"]) if rows else ""


def _at_the_held_node(drill: ExtensionDrill) -> tuple[PiRpc, str]:
    """A new Pi asked to run ``flow``, once the run is at its held node; that run's id."""
    pi = drill.open()
    assert pi.request({"type": "prompt", "message": "run flow"})["success"]
    wait_for(lambda: (drill.project.root / "hold.started").exists(), STEP_S,
             what="the held node", diag=pi.diagnose)
    return pi, _run_id(pi)


def _reports(pi: PiRpc) -> list[str]:
    return [text_of(m) for m in custom(pi) if (m.get("details") or {}).get("kind") == "report"]


@pytest.mark.timeout(180)
def test_closing_pi_parks_the_run_a_host_finishes_it_and_the_reopened_session_catches_up_once(
        project: Project, tmp_path: Path) -> None:
    project.write_workflow("flow", FLOW)
    project.start_host()
    script = steps(
        ToolCalls(start("flow", task="hold")), Text("Queued."),
        Text("It completed with ok: true."),
    )
    with extension_drill(project, script, tmp_path / "pi") as drill:
        pi, run = _at_the_held_node(drill)
        # Progress in the footer and the widget while Pi is open.
        wait_status(pi, lambda s: "running at hold" in s, what="running at hold")
        widgets = [e.get("widgetLines") or [] for e in ui(pi, "setWidget")]
        assert any(run in " ".join(lines) and "hold" in " ".join(lines)
                   for lines in widgets), widgets
        [runner] = activations(project)
        session = session_file(pi)
        pi.close()  # SIGTERM: Pi emits session_shutdown
        # Close-to-park: the session runner parked the run and exited; the host resumes it.
        wait_for(lambda: not alive(runner.pid), STEP_S, what="the session runner to exit")
        wait_for(lambda: len((project.root / "hold.started").read_text().split()) == 2,
                 STEP_S, what="the host to resume the held node")
        project.release()
        wait_for(lambda: _state(project, run) == "done", STEP_S, what="the host to finish")
        events = [r["type"] for r in query(
            project, "SELECT type FROM run_events WHERE run_id = ? ORDER BY seq", (run,))]
        assert "parked" in events, events

        reopened = drill.reopen(session)
        wait_for(lambda: _reports(reopened), STEP_S, what="the catch-up",
                 diag=reopened.diagnose)
        [report] = _reports(reopened)
        assert f"run {run} (flow) completed" in report, report
        assert len(drill.model.completions) == 2  # quiet: the catch-up asked for no turn
        assert reopened.request({"type": "prompt", "message": "what happened?"})["success"]
        reopened.read_until("agent_end", STEP_S)
        assert any(report in t for t in drill.model.completions[2].texts("user"))
        reopened.close()
        # Once: a second reopening adds no second catch-up.
        again = drill.reopen(session)
        assert again.request({"type": "prompt", "message": "/workflow status"})["success"]
        wait_for(lambda: ui(again, "notify"), STEP_S, what="the status answer")
        assert len(_reports(again)) == 1
        drill.check()


@pytest.mark.timeout(120)
def test_kill_9_of_pi_parks_the_run_through_the_session_runners_stdin(
        project: Project, tmp_path: Path) -> None:
    project.write_workflow("flow", FLOW)
    script = steps(ToolCalls(start("flow", task="hold")), Text("Queued."))
    with extension_drill(project, script, tmp_path / "pi") as drill:
        pi, run = _at_the_held_node(drill)
        [runner] = activations(project)
        session = session_file(pi)
        pi.proc.kill()  # SIGKILL: no session_shutdown, no SIGTERM for the child
        pi.proc.wait(10)
        pi.close()
        wait_for(lambda: _state(project, run) == "parked", STEP_S, what="the run parked")
        wait_for(lambda: not alive(runner.pid), STEP_S, what="the session runner to exit")
        status = json.loads(project.cli("status", run, "--json").stdout)
        assert status["currentNode"] == "hold"
        reopened = drill.reopen(session)
        wait_for(lambda: _reports(reopened), STEP_S, what="the catch-up")
        assert f"run {run} (flow) is parked at hold" in _reports(reopened)[0]
        drill.check()


@pytest.mark.timeout(150)
def test_a_checkpoint_answered_with_the_command_runs_on_and_the_model_is_told(
        project: Project, tmp_path: Path) -> None:
    project.write_workflow("flow", FLOW)
    project.start_host()
    script = steps(ToolCalls(start("flow", task="ask")), Text("Queued."),
                   Text("The answered run completed."))
    with extension_drill(project, script, tmp_path / "pi") as drill:
        pi = drill.open()
        assert pi.request({"type": "prompt", "message": "/workflow"})["success"]
        listing = wait_for(lambda: next((e["message"] for e in ui(pi, "notify")), None),
                           STEP_S, what="the workflow list")
        assert listing.startswith("Workflows:\nflow"), listing
        assert pi.request({"type": "prompt", "message": "run flow"})["success"]
        wait_for(lambda: any("waiting at checkpoint ask" in r for r in _reports(pi)), STEP_S,
                 what="the waiting report", diag=pi.diagnose)
        run = _run_id(pi)
        assert pi.request({"type": "prompt",
                           "message": f"/workflow answer {run} go on"})["success"]
        note = wait_for(lambda: next((e["message"] for e in ui(pi, "notify")
                                      if "continuation" in str(e.get("message"))), None),
                        STEP_S, what="the answer's notice")
        child = note.split("continuation ")[1].split(" ")[0]
        wait_for(lambda: any(f"run {child} (flow) completed" in r for r in _reports(pi)),
                 STEP_S, what="the continuation's result", diag=pi.diagnose)
        wait_status(pi, lambda s: "completed" in s, what="the footer's final state")
        assert len(drill.model.completions) == 2  # told quietly, no turn of its own
        assert pi.request({"type": "prompt", "message": "did it finish?"})["success"]
        drill.model.wait_for_requests(3, STEP_S)
        told = drill.model.completions[2].texts("user")
        assert any(f"run {child} (flow) completed" in t for t in told), told
        drill.check()
