"""`pause` with a real host and worker: a run paused mid-node holds at the next
boundary, stays paused through a kill -9 of the host and a new host, and
`resume` completes it with each node run once.
"""

from __future__ import annotations

import json
import os
import signal

import pytest

from .harness import Project, wait_for
from .snippets import HOLD, ONE_NODE

pytestmark = pytest.mark.slow  # real processes: an e2e drill

FLOW = HOLD + """
from pi_workflows import define_workflow, compute, edge

def mark(name):
    def fn(ctx):
        with open(ctx.project_dir / f"{name}.ran", "a") as fh:
            fh.write(ctx.attempt_id + "\\n")
        return {name: True}
    return fn

workflow = define_workflow(
    start_at="a",
    nodes=[compute("a", hold("a")), compute("b", mark("b")), compute("c", mark("c"))],
    edges=[edge("a", "b"), edge("b", "c")],
)
"""


def _started(project: Project, run_id: str) -> list[str]:
    return [e["nodeId"] for e in project.events(run_id) if e["type"] == "node_started"]


@pytest.mark.timeout(150)
def test_a_paused_run_survives_the_host_and_resume_completes_it_once(project: Project) -> None:
    project.write_workflow("paused", FLOW)
    project.write_workflow("other", ONE_NODE)
    host = project.start_host()
    run_id = project.detach("paused")
    wait_for(lambda: project.lines("a.started"), what="node a to start")

    asked = json.loads(project.cli("pause", run_id, "--no-wait", "--json").stdout)
    assert asked["pauseRequested"] is True and asked["paused"] is False, asked
    assert "pause requested" in project.cli("status", run_id).stdout
    project.release()  # node a finishes normally
    wait_for(lambda: project.row(run_id).error_code == "paused"
             and project.row(run_id).state == "parked", 30, what="the run to hold",
             diag=lambda: project.diagnose([run_id]))
    assert _started(project, run_id) == ["a"]
    assert not project.lines("b.ran")  # the next node did not start
    assert [e["type"] for e in project.events(run_id)][-1] == "run_paused"
    assert project.state(run_id)["outputs"]["a"] == {"held": "a"}
    shown = project.cli("status", run_id).stdout
    assert "paused before b" in shown and f"resume {run_id}" in shown, shown

    os.kill(host.pid, signal.SIGKILL)
    host.wait()
    project.start_host(log="host2.log")
    # The new host works (another run completes) and leaves the paused one alone.
    other = project.detach("other")
    wait_for(lambda: project.row(other).state == "done", 30, what="the other run",
             diag=lambda: project.diagnose([other]))
    row = project.row(run_id)
    assert (row.state, row.error_code) == ("parked", "paused")
    assert json.loads(project.cli("status", run_id, "--json").stdout)["paused"] is True

    project.cli("resume", run_id)
    wait_for(lambda: project.row(run_id).state == "done", 30, what="the resumed run",
             diag=lambda: project.diagnose([run_id]))
    assert _started(project, run_id) == ["a", "b", "c"]  # each node once
    assert len(project.lines("a.started")) == 1
    assert len(project.lines("b.ran")) == len(project.lines("c.ran")) == 1
    types = [e["type"] for e in project.events(run_id)]
    assert types.index("run_paused") < types.index("run_resumed") < types.index("run_completed")
    assert project.state(run_id)["status"] == "completed"


@pytest.mark.timeout(150)
def test_a_pause_request_outlives_a_kill_9_of_the_worker(project: Project) -> None:
    project.write_workflow("paused", FLOW)
    project.start_host()
    run_id = project.detach("paused")
    wait_for(lambda: project.lines("a.started"), what="node a to start")
    worker = next(p["pid"] for p in project.state_processes(run_id) if p["role"] == "worker")
    project.cli("pause", run_id, "--no-wait")
    os.kill(worker, signal.SIGKILL)  # before it reached a boundary
    # The host starts the run again; its new worker holds at the first boundary,
    # before node a's interrupted attempt runs again.
    wait_for(lambda: project.row(run_id).error_code == "paused"
             and project.row(run_id).state == "parked", 60, what="the run to hold",
             diag=lambda: project.diagnose([run_id]))
    assert len(project.lines("a.started")) == 1 and not project.lines("b.ran")
    assert [e["type"] for e in project.events(run_id)][-1] == "run_paused"
    project.release()
    project.cli("resume", run_id)
    wait_for(lambda: project.row(run_id).state == "done", 30, what="the resumed run",
             diag=lambda: project.diagnose([run_id]))
    assert len(project.lines("a.started")) == 2  # the interrupted attempt, then this one
    assert len(project.lines("b.ran")) == len(project.lines("c.ran")) == 1
