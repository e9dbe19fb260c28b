"""A model's structured progress through the real, pinned Pi and the `workflow` tool
(the headless bridge) against the scripted model: text, an object and JSON text are
taken, a malformed one is refused with the reason as the tool's error, and `watch`
reads the recorded progress as `2/3 sections (66%)`."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from .agents_kit import (
    Turn,
    node_of,
    of_type,
    stop_hosts_and_check_nothing_left,
    submit,
    tool_results,
    update,
    use_brain,
)
from .harness import Project, wait_for
from .scripted_model import Reply, Text, ToolCalls, call
from .sessions_kit import cli_argv

pytestmark = pytest.mark.slow  # real processes: an e2e drill

PLAN = """
from pi_workflows import define_workflow, agent

workflow = define_workflow(start_at="plan", nodes=[agent("plan", "Write the three sections")])
"""
SECOND = {"progress": {"done": 2, "total": 3, "unit": "sections"}, "message": "drafting"}


def structured(attempt: str, value: Any) -> Any:
    return call("workflow", {"action": "update", "step": node_of(attempt), "attempt": attempt,
                             "update": value})


@pytest.mark.timeout(180)
def test_a_models_update_may_be_text_an_object_or_json_text_and_a_bad_one_is_refused(
        project: Project, tmp_path: Path) -> None:
    project.write_workflow("plan", PLAN)

    def decide(turn: Turn) -> Reply | None:
        att = turn.attempt
        script = [
            ToolCalls(update(att, "reading the brief")),
            ToolCalls(structured(att, {"progress": {"done": 1, "total": 0}})),  # refused
            ToolCalls(structured(att, '{"progress": {"done": 1, "total": 3}}')),
            ToolCalls(structured(att, SECOND)),
            ToolCalls(submit(att, {"sections": 3})),
        ]
        return script[turn.index] if turn.node == "plan" and turn.index < len(script) \
            else None

    with use_brain(project, tmp_path, decide) as brain:
        project.start_host()
        run_id = project.detach("plan")
        watcher = subprocess.Popen(cli_argv(project, "watch", run_id), env=project.env,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        out, err = watcher.communicate(timeout=120)
        assert watcher.returncode == 0, (out, err, brain.describe())
        assert brain.model is not None and not brain.model.problems, brain.describe()
        # Each request carries the verdict on the update the one before it sent.
        _, after_text, after_bad, after_json, after_object = brain.model.completions
        assert tool_results(after_text)[-1] == "Progress recorded; carry on with the step."
        assert tool_results(after_bad)[-1].startswith(
            "Update refused: progress.total must be a number above 0 (or left out), got 0.")
        assert tool_results(after_json)[-1] == "Progress recorded; carry on with the step."
        assert tool_results(after_object)[-1] == "Progress recorded; carry on with the step."

        recorded = [e["payload"]["data"] for e in of_type(project.events(run_id),
                                                          "update_published")]
        sent = [{"message": "reading the brief"}, {"progress": {"done": 1, "total": 3}}, SECOND]
        # Close together, an update may be replaced by the next before it is written
        # (the rate limit keeps the latest): the first and the last are always there.
        assert recorded[0] == sent[0] and recorded[-1] == SECOND
        assert all(r in sent for r in recorded) and len(recorded) == len(
            {str(r) for r in recorded})
        assert "plan: reading the brief" in out
        assert "plan: 2/3 sections (66%) · drafting" in out
        assert project.state(run_id)["outputs"]["plan"] == {"sections": 3}
        stop_hosts_and_check_nothing_left(project)


@pytest.mark.timeout(180)
def test_an_in_session_steps_structured_update_reaches_the_trace_and_the_pi_widget(
        project: Project, tmp_path: Path) -> None:
    """The session's own `workflow` tool (the extension's schema, not the bridge's): the
    update is judged by the run's worker, recorded, and the widget shows its bar while
    the step still runs (the model's next reply waits until it does)."""
    from .piext_kit import extension_drill, start, started_run, step_attempt, steps, ui

    project.write_workflow("plan", PLAN)
    widget_line: list[str] = []

    def report(request: Any) -> Reply:
        return ToolCalls(structured(step_attempt(request), SECOND))

    def submit_once_shown(request: Any) -> Reply:
        def shown() -> str | None:
            for event in ui(drill_pi[0], "setWidget"):
                for line in event.get("widgetLines") or []:
                    if "▶ plan" in line and "2/3 sections (66%)" in line:
                        return str(line)
            return None

        widget_line.append(str(wait_for(shown, 45, what="the widget's progress line")))
        return ToolCalls(submit(step_attempt(request), {"sections": 3}))

    drill_pi: list[Any] = []
    script = steps(ToolCalls(start("plan")), Text("Queued."), report, submit_once_shown,
                   Text("Done."))
    with extension_drill(project, script, tmp_path / "pi") as drill:
        pi = drill.open()
        drill_pi.append(pi)
        assert pi.request({"type": "prompt", "message": "Run plan."})["success"]
        run = wait_for(lambda: started_run(pi), 45, what="the queued run", diag=pi.diagnose)
        wait_for(lambda: project.row(run).state == "done", 60, what="the run to finish",
                 diag=pi.diagnose)
        updates = [e["payload"] for e in of_type(project.events(run), "update_published")]
        assert updates == [{"data": SECOND, "message": "drafting"}]
        assert "[#######---] 2/3 sections (66%) drafting" in widget_line[0], widget_line
        update_ends = [e for e in pi.events if e.get("type") == "tool_execution_end"
                       and ((e.get("result") or {}).get("details") or {}).get("action")
                       == "update"]
        assert update_ends and not update_ends[0].get("isError"), update_ends
        drill.check()
