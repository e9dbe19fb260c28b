"""`pi-workflows resume RUN --here`: a parked run continues in this terminal, no host."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest

from .harness import Project, wait_for
from .snippets import HOLD

pytestmark = pytest.mark.slow  # real processes: an e2e drill

FLOW = HOLD + """
from pi_workflows import define_workflow, compute, edge

workflow = define_workflow(
    start_at="first",
    nodes=[compute("first", lambda ctx: {"first": 1}), compute("hold", hold("hold")),
           compute("end", lambda ctx: {"ok": True})],
    edges=[edge("first", "hold"), edge("hold", "end")],
)
"""


@pytest.mark.timeout(120)
def test_a_parked_run_resumes_here_at_its_interrupted_node(project: Project) -> None:
    project.write_workflow("flow", FLOW)
    attached = subprocess.Popen([sys.executable, "-m", "pi_workflows", "run", "flow",
                                 "--session", "s1", "--project", str(project.root)],
                                env=project.env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    wait_for(lambda: len(project.lines("hold.started")) == 1, what="node hold running")
    attached.send_signal(signal.SIGINT)  # Ctrl-C parks it; no host runs
    _, err = attached.communicate(timeout=60)
    assert attached.returncode == 4, err
    status = json.loads(project.cli("status", "--session", "s1", "--json").stdout)
    run_id = status["run"]["runId"]
    assert status["run"]["queueState"] == "parked"
    project.release()
    resumed = project.cli("resume", run_id, "--here", check=False)
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed at hold" in resumed.stdout
    assert resumed.stdout.splitlines()[-1].endswith('completed: {"ok": true}')
    row = project.row(run_id)
    assert row.state == "done" and row.runner_id is None
    started = [e for e in project.events(run_id) if e["type"] == "node_started"]
    assert [e["nodeId"] for e in started] == ["first", "hold", "hold", "end"]  # no repeat of first
    assert len(project.lines("hold.started")) == 2


@pytest.mark.timeout(60)
def test_resume_here_refuses_a_run_that_is_not_parked(project: Project) -> None:
    project.write_workflow("flow", FLOW)
    run_id = project.detach("flow")  # queued for a host that is not running
    out = project.cli("resume", run_id, "--here", check=False)
    assert out.returncode == 2 and "only a paused or parked run can be resumed" in out.stderr
    assert project.row(run_id).state == "queued"
