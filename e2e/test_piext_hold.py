"""Escape during an in-session agent step holds the step, in a real Pi (RPC mode, the
scripted model): the RPC ``abort`` while the model is mid-response ends the turn
aborted; the worker sends no reminder and the run stays running at the node, the footer
says the step is held, and ``/workflow resume`` delivers the same attempt again, which
the model then submits. A held step's node timeout keeps running: the run times out
at the node, with no reminder and no turn. The terminal's version (Escape on a pty) is
``e2e/test_piext_tui.py``."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from .harness import Project, wait_for
from .pi_env import PiRpc
from .piext_kit import (
    STEP_S,
    custom,
    extension_drill,
    follow_ups,
    start,
    started_run,
    statuses,
    steps,
    submit_step,
    wait_status,
)
from .scripted_model import Stall, Text, ToolCalls, call
from .sessions_kit import query

pytestmark = pytest.mark.slow  # real processes: an e2e drill

HELD = "held: /workflow resume delivers the step again"
TIMEOUT_S = 6.0

ASK = '''
from pi_workflows import agent, compute, define_workflow, edge

workflow = define_workflow(
    start_at="ask",
    nodes=[
        agent("ask", lambda ctx: "Name a colour for " + ctx.input.get("task", ""),
              expected_output={"type": "object", "required": ["answer"],
                               "properties": {"answer": {"type": "string"}}}),
        compute("finish", lambda ctx: {"answer": ctx.outputs["ask"]["answer"]}),
    ],
    edges=[edge("ask", "finish")],
)
'''


def _status(project: Project, run: str) -> dict[str, Any]:
    return dict(json.loads(project.cli("status", run, "--json").stdout))


def _steps_delivered(pi: PiRpc) -> list[dict[str, Any]]:
    return [m for m in custom(pi) if (m.get("details") or {}).get("kind") in ("step", "remind")]


@pytest.mark.timeout(180)
def test_abort_mid_response_holds_the_step_and_resume_delivers_it_again(
        project: Project, tmp_path: Path) -> None:
    project.write_workflow("ask", ASK)
    stall = Stall("Let me think", timeout=120.0)
    right = submit_step({"answer": "amber"})

    script = steps(ToolCalls(start("ask", task="autumn")), Text("Queued."), stall, right)
    with extension_drill(project, script, tmp_path / "pi") as drill:
        pi = drill.open()
        assert pi.request({"type": "prompt", "message": "run ask"})["success"]
        run = wait_for(lambda: started_run(pi), STEP_S, what="the queued run", diag=pi.diagnose)

        # The step's turn is mid-response: the user stops it (Escape; here RPC abort).
        stall.wait_reached(STEP_S)
        assert pi.request({"type": "abort"}, STEP_S)["success"]
        assert stall.wait_done(STEP_S) == "disconnected"
        held = wait_status(pi, lambda s: "held" in s, what="the footer to say held")
        assert held.startswith("workflow ask: running at ask"), held
        assert "/workflow resume delivers the step again" in held

        # Held: the run is still running at its node, and the turn's end was not
        # answered with a reminder (the worker reads `settled` before `redeliver`, so a
        # reminder would be in the conversation before the second step message).
        status = _status(project, run)
        assert (status["queueState"], status["currentNode"]) == ("running", "ask"), status
        [first] = _steps_delivered(pi)
        assert first["details"]["kind"] == "step"

        assert pi.request({"type": "prompt", "message": "/workflow resume"}, STEP_S)["success"]
        wait_for(lambda: query(project, "SELECT state FROM workflow_run_queue WHERE run_id = ?",
                               (run,))[0]["state"] == "done", STEP_S,
                 what="the run to finish", diag=pi.diagnose)
        status = _status(project, run)
        assert status["runStatus"] == "completed", status
        assert status["finalOutput"] == {"answer": "amber"}

        kinds = [m["details"]["kind"] for m in _steps_delivered(pi)]
        assert kinds == ["step", "step"], kinds
        again = _steps_delivered(pi)[1]
        assert again["details"]["attempt"] == first["details"]["attempt"]
        assert again["details"]["runId"] == run
        sent = [e for e in project.events(run) if e["type"] == "agent_prompt_sent"]
        assert [e["payload"]["via"] for e in sent] == ["session", "session"]
        # The footer left `held` once the step was delivered again, and shows the end.
        wait_status(pi, lambda s: s.startswith("workflow ask: completed"),
                    what="the footer to say completed")
        assert "held" not in statuses(pi)[-1], statuses(pi)
        assert len(drill.model.completions) == 4
        drill.check()


@pytest.mark.timeout(180)
def test_a_held_step_still_times_out_at_its_node_timeout_with_no_reminder_and_no_turn(
        project: Project, tmp_path: Path) -> None:
    # Started by the person (`/workflow NAME`), so its end owes the model no turn.
    project.write_workflow("ask", ASK.replace(
        '"properties": {"answer": {"type": "string"}}}),',
        '"properties": {"answer": {"type": "string"}}}, timeout=TIMEOUT_S),').replace(
        "from pi_workflows", f"TIMEOUT_S = {TIMEOUT_S}\nfrom pi_workflows", 1))
    stall = Stall("Let me think", timeout=120.0)
    with extension_drill(project, steps(stall), tmp_path / "pi") as drill:
        pi = drill.open()
        assert pi.request({"type": "prompt", "message": "/workflow ask autumn"})["success"]
        stall.wait_reached(STEP_S)
        assert pi.request({"type": "abort"}, STEP_S)["success"]
        wait_status(pi, lambda s: s.endswith(HELD), what="the footer to say held")
        [run] = {m["details"]["runId"] for m in _steps_delivered(pi)}
        held_at = time.monotonic()
        wait_for(lambda: query(project, "SELECT state FROM workflow_run_queue WHERE run_id = ?",
                               (run,))[0]["state"] == "failed", STEP_S,
                 what="the held step to time out", diag=pi.diagnose)
        status = _status(project, run)
        assert status["runStatus"] == "timed_out", status
        assert status["errorCode"] == "node_timed_out", status
        assert time.monotonic() - held_at < TIMEOUT_S + 15  # the timeout, not something later
        shown = wait_status(pi, lambda s: s.startswith("workflow ask: failed"),
                            what="the footer to say failed")
        assert HELD not in shown, shown
        kinds = [m["details"]["kind"] for m in _steps_delivered(pi)]
        assert kinds == ["step"], kinds
        # No reminder and no deferred turn: the run's end is the quiet report (a turn owed
        # would be sent right after it, in the same delivery), and the model was asked
        # once, for the stalled reply.
        wait_for(lambda: any((m.get("details") or {}).get("kind") == "report"
                             for m in custom(pi)) or None, STEP_S, what="the run's report",
                 diag=pi.diagnose)
        assert follow_ups(pi) == []
        assert len(drill.model.completions) == 1
        drill.check()


@pytest.mark.timeout(180)
def test_a_turn_of_the_users_own_after_the_hold_ends_it_with_the_usual_reminder(
        project: Project, tmp_path: Path) -> None:
    project.write_workflow("ask", ASK)
    stall = Stall("Let me think", timeout=120.0)

    right = submit_step({"answer": "rust"})

    script = steps(stall, Text("It is autumn."), right)
    with extension_drill(project, script, tmp_path / "pi") as drill:
        pi = drill.open()
        assert pi.request({"type": "prompt", "message": "/workflow ask autumn"})["success"]
        stall.wait_reached(STEP_S)
        assert pi.request({"type": "abort"}, STEP_S)["success"]
        wait_status(pi, lambda s: s.endswith(HELD), what="the footer to say held")
        [run] = {m["details"]["runId"] for m in _steps_delivered(pi)}
        # Not `/workflow resume`: the user's own message. Its turn ends without a
        # submission, so the step is reminded as after any such turn.
        assert pi.request({"type": "prompt", "message": "what season is it?"}, STEP_S)["success"]
        wait_for(lambda: query(project, "SELECT state FROM workflow_run_queue WHERE run_id = ?",
                               (run,))[0]["state"] == "done", STEP_S,
                 what="the run to finish", diag=pi.diagnose)
        assert _status(project, run)["finalOutput"] == {"answer": "rust"}
        kinds = [m["details"]["kind"] for m in _steps_delivered(pi)]
        assert kinds == ["step", "remind"], kinds
        assert len(drill.model.completions) == 3
        drill.check()


@pytest.mark.timeout(180)
def test_abort_while_a_tool_of_the_step_runs_holds_the_step_too(
        project: Project, tmp_path: Path) -> None:
    project.write_workflow("ask", ASK)
    slow = project.root / "slow.started"

    right = submit_step({"answer": "moss"})

    # The step's turn runs a long shell command; the user stops it while it runs.
    script = steps(ToolCalls(call("bash", {"command": f"touch {slow}; sleep 60"})), right)
    with extension_drill(project, script, tmp_path / "pi") as drill:
        pi = drill.open()
        assert pi.request({"type": "prompt", "message": "/workflow ask autumn"})["success"]
        wait_for(lambda: slow.exists() or None, STEP_S, what="the step's command to start",
                 diag=pi.diagnose)
        assert pi.request({"type": "abort"}, STEP_S)["success"]
        wait_status(pi, lambda s: s.endswith(HELD), what="the footer to say held")
        [run] = {m["details"]["runId"] for m in _steps_delivered(pi)}
        status = _status(project, run)
        assert (status["queueState"], status["currentNode"]) == ("running", "ask"), status
        assert pi.request({"type": "prompt", "message": "/workflow resume"}, STEP_S)["success"]
        wait_for(lambda: query(project, "SELECT state FROM workflow_run_queue WHERE run_id = ?",
                               (run,))[0]["state"] == "done", STEP_S,
                 what="the run to finish", diag=pi.diagnose)
        kinds = [m["details"]["kind"] for m in _steps_delivered(pi)]
        assert kinds == ["step", "step"], kinds
        assert len(drill.model.completions) == 2
        drill.check()
