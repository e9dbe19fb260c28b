"""A reopened Pi resumes its parked run when no host runs (seed 000, acceptance 2), in
a real Pi (RPC mode, the scripted model): the run started from Pi, Pi killed with
``kill -9`` mid-run, no host; the reopened session resumes the run at the interrupted
node and it completes. And a race: two Pis reopened together for one parked run, then
a host started while the winner runs it, give exactly one runner (each node once)."""

from __future__ import annotations

import json
import signal
from collections import Counter
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
    statuses,
    steps,
    text_of,
)
from .scripted_model import Text, ToolCalls, call
from .sessions_kit import FLOW, query

pytestmark = pytest.mark.slow  # real processes: an e2e drill


def _state(project: Project, run: str) -> str:
    rows = query(project, "SELECT state FROM workflow_run_queue WHERE run_id = ?", (run,))
    return str(rows[0]["state"]) if rows else ""


def _reports(pi: PiRpc) -> list[str]:
    return [text_of(m) for m in custom(pi) if (m.get("details") or {}).get("kind") == "report"]


def _attempts(project: Project) -> list[str]:
    path = project.root / "hold.started"
    return path.read_text().split() if path.exists() else []


def _started_nodes(project: Project, run: str) -> Counter[str]:
    runs_dir = Path(json.loads(project.cli("paths", "--json").stdout)["runsDir"])
    events = [json.loads(line) for line in
              (runs_dir / run / "trace.ndjson").read_text().splitlines() if line.strip()]
    return Counter(e["nodeId"] for e in events if e["type"] == "node_started")


def _killed_mid_run(drill: ExtensionDrill) -> tuple[str, str]:
    """Pi started ``flow`` and was killed with -9 at the held node; the run parked.
    The run id and the session file."""
    pi = drill.open()
    assert pi.request({"type": "prompt", "message": "run flow"})["success"]
    wait_for(lambda: _attempts(drill.project), STEP_S, what="the held node",
             diag=pi.diagnose)
    run = str(next(e for e in pi.events if e.get("type") == "tool_execution_end")
              ["result"]["details"]["runId"])
    [runner] = activations(drill.project)
    session = session_file(pi)
    pi.proc.kill()
    pi.proc.wait(10)
    pi.close()
    wait_for(lambda: _state(drill.project, run) == "parked", STEP_S, what="the run parked")
    wait_for(lambda: not alive(runner.pid), STEP_S, what="the session runner to exit")
    return run, session


@pytest.mark.timeout(180)
def test_reopened_without_a_host_the_session_resumes_its_parked_run_and_it_completes(
        project: Project, tmp_path: Path) -> None:
    project.write_workflow("flow", FLOW)
    script = steps(ToolCalls(start("flow", task="hold")), Text("Queued."))
    with extension_drill(project, script, tmp_path / "pi") as drill:
        run, session = _killed_mid_run(drill)
        reopened = drill.reopen(session)
        # It resumes at the interrupted node, in a session runner of this Pi.
        wait_for(lambda: len(_attempts(project)) == 2, STEP_S,
                 what="the reopened session to resume the held node", diag=reopened.diagnose)
        # The loser's `resume` may still be on its way out: wait until one runner is left.
        runner = wait_for(lambda: (lambda found: found[0] if len(found) == 1 else None)(
            activations(project)), STEP_S, what="one session runner")
        assert "resume" in runner.cmdline() and run in runner.cmdline()
        [report] = wait_for(lambda: _reports(reopened), STEP_S, what="the catch-up")
        assert f"run {run} (flow) is parked at hold" in report, report
        assert "this session resumes it now" in report, report
        assert "a running host resumes it" not in report and "--background" not in report
        project.release()
        wait_for(lambda: _state(project, run) == "done", STEP_S, what="the run to complete",
                 diag=reopened.diagnose)
        assert json.loads(project.cli("status", run, "--json").stdout)["finalOutput"] == \
            {"ok": True}
        wait_for(lambda: any(f"run {run} (flow) completed" in r for r in _reports(reopened)),
                 STEP_S, what="the result's report", diag=reopened.diagnose)
        assert _started_nodes(project, run) == Counter({"pick": 1, "hold": 2, "end": 1})
        assert len(drill.model.completions) == 2  # quiet: no model turn for any of it
        drill.check()


@pytest.mark.timeout(180)
def test_two_reopened_pis_and_a_host_for_one_parked_run_give_one_runner(
        project: Project, tmp_path: Path) -> None:
    project.write_workflow("flow", FLOW)
    script = steps(ToolCalls(start("flow", task="hold")), Text("Queued."))
    with extension_drill(project, script, tmp_path / "pi") as drill:
        run, session = _killed_mid_run(drill)
        # Two Pis reopen at once with no host: they race for the run, one resumes it.
        first = drill.reopen(session, ready=False)
        second = drill.reopen(session, ready=False)
        first.wait_ready(STEP_S)
        second.wait_ready(STEP_S)
        wait_for(lambda: len(_attempts(project)) >= 2, STEP_S,
                 what="one Pi to resume the held node", diag=first.diagnose)
        # Both Pis have looked (each shows the run in its footer), and a host starts while
        # the winner runs it: the host must not take it too.
        wait_for(lambda: statuses(first) and statuses(second), STEP_S, what="both footers")
        project.start_host()
        # The loser's `resume` may still be on its way out: wait until one runner is left.
        runner = wait_for(lambda: (lambda found: found[0] if len(found) == 1 else None)(
            activations(project)), STEP_S, what="one session runner")
        assert "resume" in runner.cmdline()
        project.release()
        wait_for(lambda: _state(project, run) == "done", STEP_S, what="the run to complete")
        assert len(_attempts(project)) == 2, _attempts(project)
        assert _started_nodes(project, run) == Counter({"pick": 1, "hold": 2, "end": 1})
        events = [r["type"] for r in query(
            project, "SELECT type FROM run_events WHERE run_id = ? ORDER BY seq", (run,))]
        assert events.count("done") == 1, events
        def told() -> list[str]:
            return [r for r in _reports(first) + _reports(second)
                    if f"run {run} (flow) completed" in r]
        # The session's one watermark: the Pi that synced first reports it, once.
        wait_for(told, STEP_S, what="the result's report")
        assert len(told()) == 1, told()
        drill.check()


@pytest.mark.timeout(180)
def test_the_tools_resume_runs_a_parked_run_in_this_session_after_the_turn_without_a_host(
        project: Project, tmp_path: Path) -> None:
    project.write_workflow("flow", FLOW)
    parked: list[str] = []
    script = steps(
        ToolCalls(start("flow", task="hold")), Text("Queued."),
        lambda _request: ToolCalls(call("workflow", {"action": "resume", "runId": parked[0]})),
        Text("It resumes after this turn."),
    )
    with extension_drill(project, script, tmp_path / "pi") as drill:
        pi = drill.open()
        assert pi.request({"type": "prompt", "message": "run flow"})["success"]
        wait_for(lambda: _attempts(project), STEP_S, what="the held node", diag=pi.diagnose)
        run = str(next(e for e in pi.events if e.get("type") == "tool_execution_end")
                  ["result"]["details"]["runId"])
        [runner] = activations(project)
        runner.send_signal(signal.SIGTERM)  # parked; this Pi stays open, no host runs
        wait_for(lambda: _state(project, run) == "parked", STEP_S, what="the run parked")
        wait_for(lambda: not alive(runner.pid), STEP_S, what="the session runner to exit")
        parked.append(run)
        assert pi.request({"type": "prompt", "message": "resume it"})["success"]
        wait_for(lambda: len(_attempts(project)) == 2, STEP_S,
                 what="this session to resume the held node", diag=pi.diagnose)
        ends = [e for e in pi.events if e.get("type") == "tool_execution_end"]
        assert not ends[-1]["isError"], ends[-1]
        assert "resumes in this session at hold" in ends[-1]["result"]["content"][0]["text"]
        project.release()
        wait_for(lambda: _state(project, run) == "done", STEP_S, what="the run to complete")
        assert _started_nodes(project, run) == Counter({"pick": 1, "hold": 2, "end": 1})
        drill.check()
