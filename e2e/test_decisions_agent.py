"""A decision node in the real, pinned Pi against the scripted model: the prompt lists the
choices, a value that is not one of them is refused and the model submits again, and the
run routes on the accepted choice; the run's title shows in ``list`` and ``status``. The
workflow is the shipped ``examples/triage.workflow.py`` (issue 23, items 2 and 3)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .agents_kit import (
    Turn,
    all_text,
    of_type,
    stop_hosts_and_check_nothing_left,
    submit,
    tool_results,
    use_brain,
    wait_queue,
)
from .harness import Project
from .scripted_model import Reply, ToolCalls

pytestmark = pytest.mark.slow  # real processes: an e2e drill

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "triage.workflow.py"
ISSUE = "The login page crashes\nClicking 'Sign in' shows a blank page since 2.3."


@pytest.mark.timeout(180)
def test_a_decision_refuses_another_value_and_routes_on_the_choice(
        project: Project, tmp_path: Path) -> None:
    project.write_workflow("triage", EXAMPLE.read_text())

    def decide(turn: Turn) -> Reply | None:
        if turn.node != "classify" or turn.n != 1 or turn.index > 1:
            return None
        if turn.index == 0:
            return ToolCalls(submit(turn.attempt, {"route": "crash"}))  # not a choice
        return ToolCalls(submit(turn.attempt, {"route": "bug", "reason": "it crashes"}))

    with use_brain(project, tmp_path, decide) as brain:
        project.start_host()
        run_id = project.detach("triage", {"text": ISSUE})
        assert wait_queue(project, run_id, "done", "failed", brain=brain) == "done"
        state = project.state(run_id)
        assert state["status"] == "completed", brain.describe()
        assert state["outputs"]["classify"] == {"route": "bug", "reason": "it crashes"}
        assert "feature" not in state["outputs"] and "question" not in state["outputs"]
        assert state["finalOutput"]["message"] == (
            "Triage: The login page crashes is a bug: it crashes")

        first, second = brain.of("classify")
        prompt = all_text(first.request)
        assert "Is this issue a bug report, a feature request or a question?" in prompt
        assert "- bug\n- feature\n- question" in prompt and ISSUE.splitlines()[1] in prompt
        assert "Submission rejected" in tool_results(second.request)[-1]
        assert "'bug', 'feature', 'question'" in tool_results(second.request)[-1]

        events = project.events(run_id)
        [started] = of_type(events, "run_started")
        assert started["payload"]["title"] == "Triage: The login page crashes"
        details = {e["nodeId"]: e["payload"].get("statusDetail")
                   for e in of_type(events, "node_started")}
        assert details["classify"] == f"{len(ISSUE)} characters to read"
        assert details["report"] == "telling the session"

        status = json.loads(project.cli("status", run_id, "--json").stdout)
        assert status["title"] == "Triage: The login page crashes"
        # The detail column is cut to the width (an ellipsis) when the terminal is narrow.
        assert '"Triage: The login' in project.cli("list").stdout
        stop_hosts_and_check_nothing_left(project)
