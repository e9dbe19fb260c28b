"""The Pi extension's surface, in a real Pi (RPC mode, the scripted model): the
workflow list shows broken files with their error, ``/workflow NAME --input-json``,
a JSON answer reaches the workflow as JSON (the shipped review example publishes on
``{"approved": true}``), a finished run's widget stays a while with one glyph line
per node, ``/workflow PATH`` starts the workflow at that path, and the tool's
``list`` (paged), ``pause`` and ``cancel`` without a run id (the session's unfinished
run): the paused run finishes its node, holds, and is then cancelled."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from .harness import Project, wait_for
from .pi_env import PiRpc
from .piext_kit import STEP_S, custom, extension_drill, steps, text_of, ui
from .scripted_model import Text, ToolCalls, call
from .sessions_kit import FLOW, query

pytestmark = pytest.mark.slow  # real processes: an e2e drill
REPO = Path(__file__).resolve().parents[1]


def _reports(pi: PiRpc) -> list[str]:
    return [text_of(m) for m in custom(pi) if (m.get("details") or {}).get("kind") == "report"]


def _notice(pi: PiRpc, needle: str) -> str:
    found: str = wait_for(lambda: next((str(e["message"]) for e in ui(pi, "notify")
                                        if needle in str(e.get("message"))), None),
                          STEP_S, what=f"a notice with {needle!r}", diag=pi.diagnose)
    return found


def _widgets(pi: PiRpc) -> list[list[str]]:
    return [list(e.get("widgetLines") or []) for e in ui(pi, "setWidget")]


def _tool_end(pi: PiRpc, n: int) -> dict[str, Any]:
    ends = wait_for(lambda: (lambda e: e if len(e) >= n else None)(
        [e for e in pi.events if e.get("type") == "tool_execution_end"]), STEP_S,
        what=f"tool call {n}", diag=pi.diagnose)
    return dict(ends[n - 1])


@pytest.mark.timeout(240)
def test_the_extension_surface_list_json_answer_widget_path_and_tool_actions(
        project: Project, tmp_path: Path) -> None:
    project.write_workflow("flow", FLOW)
    shutil.copy(REPO / "examples" / "review.workflow.py",
                project.root / ".pi" / "workflows" / "review.workflow.py")
    project.write_workflow("bad", "raise RuntimeError('broken on purpose')\n")
    project.env["PI_WORKFLOWS_WIDGET_KEEP_MS"] = "4000"
    project.start_host()
    script = steps(
        ToolCalls(call("workflow", {"action": "list", "limit": 2})), Text("Listed."),
        ToolCalls(call("workflow", {"action": "pause"})), Text("Paused."),
        ToolCalls(call("workflow", {"action": "cancel"})), Text("Cancelled."),
    )
    with extension_drill(project, script, tmp_path / "pi") as drill:
        pi = drill.open()
        # The list names the broken file and its error instead of hiding it.
        assert pi.request({"type": "prompt", "message": "/workflow"})["success"]
        listing = _notice(pi, "Workflows:")
        assert "review - Draft a release note" in listing, listing
        assert "do not load" in listing and "broken on purpose" in listing, listing

        # NAME --input-json JSON; then a JSON answer is JSON: the review publishes.
        assert pi.request({"type": "prompt", "message":
                           '/workflow review --input-json {"change": "fixed the login bug"}'}
                          )["success"]
        wait_for(lambda: any("waiting at checkpoint approve" in r for r in _reports(pi)),
                 STEP_S, what="the waiting report", diag=pi.diagnose)
        [run] = [r["run_id"] for r in query(
            project, "SELECT run_id FROM workflow_run_queue WHERE workflow = 'review'")]
        assert pi.request({"type": "prompt", "message":
                           f'/workflow answer {run} {{"approved": true}}'})["success"]
        child = _notice(pi, "continuation").split("continuation ")[1].split(" ")[0]
        done = wait_for(lambda: next((r for r in _reports(pi)
                                      if f"run {child} (review) completed" in r), None),
                        STEP_S, what="the continuation's result", diag=pi.diagnose)
        assert "published" in done and "not published" not in done, done
        assert list((project.root / "release-notes").glob("*.md"))

        # The finished run's widget: one line per node with a glyph, kept, then gone.
        kept = wait_for(lambda: next((w for w in _widgets(pi) if w and child in w[0]
                                      and "completed" in w[0]), None),
                        STEP_S, what="the finished widget", diag=pi.diagnose)
        assert "  ✓ publish" in kept and "  ✓ decide" in kept and "  · discarded" in kept, kept
        wait_for(lambda: not _widgets(pi)[-1], STEP_S, what="the widget to go")

        # /workflow PATH: the workflow at that path, with task words.
        assert pi.request({"type": "prompt", "message":
                           "/workflow ./.pi/workflows/flow.workflow.py hold"})["success"]
        wait_for(lambda: (project.root / "hold.started").exists(), STEP_S,
                 what="the held node", diag=pi.diagnose)
        running = wait_for(lambda: next((w for w in _widgets(pi)
                                         if any(line.startswith("  ▶ hold") for line in w)),
                                        None), STEP_S, what="the running widget")
        assert "  ✓ pick" in running and "  · end" in running, running

        # The tool: list, paged; cancel without a run id cancels the session's run.
        assert pi.request({"type": "prompt", "message": "list the runs"})["success"]
        listed = _tool_end(pi, 1)
        assert not listed["isError"], listed
        assert len(listed["result"]["details"]["runIds"]) == 2
        assert "more: offset 2" in listed["result"]["content"][0]["text"]
        pi.read_until("agent_end", STEP_S)
        [flow] = [r["run_id"] for r in query(
            project, "SELECT run_id FROM workflow_run_queue WHERE workflow = 'flow'")]
        # pause without a run id: the held step finishes, then the run holds before `end`.
        assert pi.request({"type": "prompt", "message": "pause it"})["success"]
        paused = _tool_end(pi, 2)
        assert not paused["isError"], paused
        assert paused["result"]["details"] == {"action": "pause", "runId": flow}
        assert "pause requested" in paused["result"]["content"][0]["text"], paused
        pi.read_until("agent_end", STEP_S)
        project.release()
        wait_for(lambda: (lambda r: r["state"] == "parked" and r["error_code"] == "paused")(
            query(project, "SELECT state, error_code FROM workflow_run_queue WHERE run_id = ?",
                  (flow,))[0]), STEP_S, what="the run paused", diag=pi.diagnose)
        kinds = [e["type"] for e in project.events(flow)]
        assert "run_paused" in kinds, kinds
        assert not any(e["type"] == "node_started" and e.get("nodeId") == "end"
                       for e in project.events(flow))
        assert pi.request({"type": "prompt", "message": "cancel it"})["success"]
        cancelled = _tool_end(pi, 3)
        assert not cancelled["isError"], cancelled
        assert cancelled["result"]["details"]["runId"] == flow
        wait_for(lambda: query(project, "SELECT state FROM workflow_run_queue WHERE run_id = ?",
                               (flow,))[0]["state"] == "cancelled", STEP_S, what="cancelled")
        drill.check()
