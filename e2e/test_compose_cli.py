"""A workflow that includes another by path, through the real CLI and host: it runs
inside the mount (status shows ``step/hold``), then a change to the child refuses the
resume exactly as a change to the parent does, until ``resume --force``; and a kill -9
of the host inside a mount (with a torn trace tail) resumes inside it."""

from __future__ import annotations

import json
import os
import signal

import pytest

from .harness import Project, alive, wait_for
from .snippets import HOLD

pytestmark = pytest.mark.slow  # real processes: an e2e drill

CHILD = HOLD + """
from pi_workflows import define_workflow, compute, edge
workflow = define_workflow(
    start_at="hold", nodes=[compute("hold", hold("hold")),
                            compute("done", lambda ctx: {"got": ctx.input["n"]})],
    edges=[edge("hold", "done")], exits={"finished": "done"})
"""
PARENT = """
from pi_workflows import define_workflow, compute, edge, include
workflow = define_workflow(
    start_at="a",
    nodes=[compute("a", lambda ctx: {"n": 3}),
           include("parts/holdstep.workflow.py", input=lambda ctx: ctx.outputs["a"],
                   as_="step"),
           compute("end", lambda ctx: ctx.outputs["step.finished"])],
    edges=[edge("a", "step"), edge("step.finished", "end")])
"""


@pytest.mark.timeout(120)
def test_a_changed_child_blocks_the_resume_until_forced(project: Project) -> None:
    parent = project.write_workflow("top", PARENT)
    child = parent.parent / "parts" / "holdstep.workflow.py"
    child.parent.mkdir()
    child.write_text(CHILD)
    host = project.start_host()
    run_id = json.loads(project.cli("run", "top", "--detach", "--json").stdout)["runId"]
    wait_for(lambda: len(project.lines("hold.started")) == 1, what="the mount's node running")
    status = json.loads(project.cli("status", run_id, "--json").stdout)
    assert status["currentNode"] == "step/hold"
    shown = project.cli("status", run_id).stdout
    assert "step/hold" in shown and "in include step" in shown
    host.send_signal(signal.SIGTERM)
    assert host.wait(30) == 0
    child.write_text(child.read_text() + "\n# edited while the run was parked\n")
    project.release()
    project.start_host(log="host2.log")
    wait_for(lambda: project.row(run_id).error_code == "source_changed",
             what="the resume refused", diag=lambda: project.diagnose([run_id]))
    row = project.row(run_id)
    assert row.state == "parked" and project.state(run_id)["status"] == "running"
    assert "included workflow file" in (row.error_message or "")
    refused = project.cli("resume", run_id, check=False)
    assert refused.returncode == 2 and "--force" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    out = json.loads(project.cli("resume", run_id, "--force", "--json").stdout)
    assert out["state"] == "parked" and out["forced"] is True
    wait_for(lambda: project.row(run_id).state == "done", what="forced resume completes",
             diag=lambda: project.diagnose([run_id]))
    state = project.state(run_id)
    assert state["finalOutput"] == {"exit": "finished", "output": {"got": 3}}
    events = project.events(run_id)
    assert [e["type"] for e in events].count("include_entered") == 1  # not entered again
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert len(project.lines("hold.started")) == 2  # the interrupted node, redone once


KILLED_CHILD = HOLD + """
from pi_workflows import define_workflow, compute, shell, edge
workflow = define_workflow(
    start_at="first",
    nodes=[shell("first", "echo once >> first.txt"), compute("hold", hold("hold")),
           compute("done", lambda ctx: {"seen": sorted(ctx.outputs)})],
    edges=[edge("first", "hold"), edge("hold", "done")], exits={"finished": "done"},
    max_steps=3)
"""
KILLED_PARENT = """
from pi_workflows import define_workflow, shell, edge, include
workflow = define_workflow(
    start_at="step",
    nodes=[include("parts/killed.workflow.py", as_="step"),
           shell("last", "echo once >> last.txt")],
    edges=[edge("step.finished", "last")])
"""


@pytest.mark.timeout(120)
def test_kill9_inside_a_mount_resumes_inside_it(project: Project) -> None:
    project.env["PI_WORKFLOWS_LEASE_MS"] = "600000"  # recovery by proof of death
    project.env["PI_WORKFLOWS_RENEW_MS"] = "100000"
    parent = project.write_workflow("outer", KILLED_PARENT)
    (parent.parent / "parts").mkdir()
    (parent.parent / "parts" / "killed.workflow.py").write_text(KILLED_CHILD)
    host = project.start_host()
    run_id = project.detach("outer")
    wait_for(lambda: len(project.lines("hold.started")) == 1, what="the mount's node running")
    [worker] = [p["pid"] for p in project.state_processes(run_id) if p["role"] == "worker"]
    os.kill(worker, signal.SIGSTOP)  # it cannot park: the kill -9 leaves it all as it was
    os.kill(host.pid, signal.SIGKILL)
    host.wait()
    before = project.state(run_id)
    assert before["currentNode"] == "step/hold" and before["mountSteps"] == {"step": 2}
    with open(project.paths.runs_dir / run_id / "trace.ndjson", "ab") as fh:
        fh.write(b'{"seq": 999, "type": "node_fini')  # a torn tail
    project.release()
    project.start_host(log="host2.log")
    wait_for(lambda: project.row(run_id).state == "done", timeout=60,
             what="the run done under the new host", diag=lambda: project.diagnose([run_id]))
    wait_for(lambda: not alive(worker), timeout=10, what="the frozen worker reaped")
    events = project.events(run_id)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    [resumed] = [e for e in events if e["type"] == "run_resumed"]
    assert resumed["payload"]["resumePoint"] == "step/hold"
    assert resumed["payload"]["droppedTraceLines"] == 1
    after = [e for e in events[events.index(resumed):] if e["type"] == "node_started"]
    # The interrupted node is redone as the same step; the mount count stays within 3.
    assert [(e["nodeId"], e["payload"]["rerun"]) for e in after] == [
        ("step/hold", True), ("step/done", False), ("last", False)]
    assert [e["type"] for e in events].count("include_entered") == 1
    state = project.state(run_id)
    assert state["status"] == "completed" and state["steps"] == 4
    assert state["outputs"]["step/done"] == {"seen": ["first", "hold"]}
    assert len(project.lines("first.txt")) == 1 and len(project.lines("last.txt")) == 1
