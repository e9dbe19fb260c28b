"""In-session agent steps, in a real Pi (RPC mode, the scripted model): a run started in a
Pi session has its agent step in that session's own conversation (the step message, the
model's `workflow` submit judged by the run's worker, a rejection as the call's error, a
reminder when the turn ends without a submission), its compute nodes in the session
runner, and no headless Pi at all."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from .agents_kit import all_text
from .harness import Project, wait_for
from .piext_kit import (
    STEP_S,
    custom,
    extension_drill,
    start,
    started_run,
    steps,
    submit_step,
    text_of,
)
from .scripted_model import Text, ToolCalls
from .sessions_kit import query

pytestmark = pytest.mark.slow  # real processes: an e2e drill

ASK = '''
import os
from pi_workflows import agent, compute, define_workflow, edge

def prepare(ctx):
    return {"pid": os.getpid(), "topic": ctx.input.get("task", "")}

def finish(ctx):
    return {"answer": ctx.outputs["ask"]["answer"],
            "prepared_in": ctx.outputs["prepare"]["pid"]}

workflow = define_workflow(
    start_at="prepare",
    nodes=[
        compute("prepare", prepare),
        agent("ask", lambda ctx: "Name a colour for " + ctx.outputs["prepare"]["topic"],
              expected_output={"type": "object", "required": ["answer"],
                               "properties": {"answer": {"type": "string"}}}),
        compute("finish", finish),
    ],
    edges=[edge("prepare", "ask"), edge("ask", "finish")],
)
'''


def _final(project: Project, run: str) -> dict[str, Any]:
    wait_for(lambda: query(project, "SELECT state FROM workflow_run_queue WHERE run_id = ?",
                           (run,))[0]["state"] == "done", STEP_S, what="the run to finish")
    status = json.loads(project.cli("status", run, "--json").stdout)
    assert status["runStatus"] == "completed", status
    return dict(status["finalOutput"])


@pytest.mark.timeout(150)
def test_the_agent_step_is_a_turn_of_the_sessions_own_conversation(
        project: Project, tmp_path: Path) -> None:
    project.write_workflow("ask", ASK)

    wrong, right = submit_step({"colour": "red"}), submit_step({"answer": "teal"})

    script = steps(ToolCalls(start("ask", task="the sea")), Text("Queued."), wrong, right,
                   Text("It was teal."))
    with extension_drill(project, script, tmp_path / "pi") as drill:
        pi = drill.open()
        assert pi.request({"type": "prompt",
                           "message": "Remember the word PELICAN. Then run ask."})["success"]
        run = wait_for(lambda: started_run(pi), STEP_S, what="the queued run", diag=pi.diagnose)
        out = _final(project, run)
        assert out["answer"] == "teal"
        # The compute nodes ran in the session runner's worker, not in Pi.
        assert out["prepared_in"] != pi.proc.pid
        # The step's request is the user's own conversation: it carries the word the
        # user said before the run started, and the step message itself.
        step_request = drill.model.completions[2]
        assert "PELICAN" in all_text(step_request)
        assert "Name a colour for the sea" in all_text(step_request)
        # The rejection was the tool call's error, answered in the same call.
        ends = [e for e in pi.events if e.get("type") == "tool_execution_end"
                and (e.get("args") or {}).get("action") == "submit"] or [
            e for e in pi.events if e.get("type") == "tool_execution_end"][1:]
        assert ends[0].get("isError") is True, ends[0]
        assert "missing required field 'answer'" in json.dumps(ends[0]["result"]), ends[0]
        assert not ends[1].get("isError"), ends[1]
        # The conversation shows the step message the model worked from.
        [step] = [m for m in custom(pi) if (m.get("details") or {}).get("kind") == "step"]
        assert step["details"]["runId"] == run
        assert "Name a colour for the sea" in text_of(step)
        # The bundle says where the conversation happened, and no headless Pi ran.
        sent = [e for e in project.events(run) if e["type"] == "agent_prompt_sent"]
        assert [e["payload"]["via"] for e in sent] == ["session"]
        kinds = [p.get("kind") for p in project.state_processes(run)]
        assert "pi" not in kinds, kinds
        described = project.cli("status", run).stdout
        assert "agent in the session" in described, described
        assert len(drill.model.completions) == 4
        # The conversation goes on as normal once the run is done.
        wait_for(lambda: pi.request({"type": "get_state"}, STEP_S)["data"].get(
            "isStreaming") is False, STEP_S, what="the step's turn to end")
        thanks = pi.request({"type": "prompt", "message": "Thanks. What colour was it?"})
        assert thanks["success"], thanks
        drill.model.wait_for_requests(5, STEP_S)
        assert "teal" in all_text(drill.model.completions[4])
        drill.check()


@pytest.mark.timeout(150)
def test_a_turn_without_a_submission_gets_a_reminder_even_with_a_long_temp_dir(
        project: Project, tmp_path: Path) -> None:
    project.write_workflow("ask", ASK)

    right = submit_step({"answer": "ochre"})

    script = steps(ToolCalls(start("ask", task="sand")), Text("Queued."),
                   Text("Thinking about it."), right)
    with extension_drill(project, script, tmp_path / "pi") as drill:
        # A temp dir too long for a socket address: the extension's socket goes to /tmp.
        long_tmp = tmp_path / ("t" * 90)
        long_tmp.mkdir()
        drill.pi_env.env["TMPDIR"] = str(long_tmp)
        pi = drill.open()
        assert pi.request({"type": "prompt", "message": "run ask"})["success"]
        run = wait_for(lambda: started_run(pi), STEP_S, what="the queued run", diag=pi.diagnose)
        assert _final(project, run)["answer"] == "ochre"
        reminded = drill.model.completions[3]
        assert "ended your turn without an accepted submission" in all_text(reminded)
        kinds = [(m.get("details") or {}).get("kind") for m in custom(pi)]
        assert kinds.count("step") == 1 and kinds.count("remind") == 1, kinds
        sent = [e for e in project.events(run) if e["type"] == "agent_prompt_sent"]
        assert len(sent) == 2 and {e["payload"]["via"] for e in sent} == {"session"}
        drill.check()
