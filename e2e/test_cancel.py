"""`cancel` always works: promptly while a node runs, at the boundary at the latest,
and on a run waiting at a checkpoint (its wait is closed for good).

The renewal interval is set far above `cancel`'s own wait here, so a run
that stops while `cancel` waits can only have learned of it from the nudge.
"""

from __future__ import annotations

import json
import signal

import pytest

from .harness import Project, alive, wait_for
from .sessions_kit import FLOW, Terminal

pytestmark = pytest.mark.slow  # real processes: an e2e drill

SLOW_RENEWAL = {"PI_WORKFLOWS_LEASE_MS": "120000", "PI_WORKFLOWS_RENEW_MS": "60000"}

SHELL = """
from pi_workflows import define_workflow, shell, compute, edge

workflow = define_workflow(
    start_at="long",
    nodes=[shell("long", "echo $$ > long.pid; exec sleep 300", idempotent=True),
           compute("never", lambda ctx: open("never.ran", "w").write("x"))],
    edges=[edge("long", "never")],
)
"""

STUBBORN = """
import time
from pi_workflows import define_workflow, compute, checkpoint, edge

def stubborn(ctx):
    (ctx.project_dir / "stubborn.started").write_text("x")
    while not (ctx.project_dir / "release").exists():
        time.sleep(0.02)  # never looks at ctx.cancel
    return {"done": True}

workflow = define_workflow(
    start_at="work",
    nodes=[compute("work", stubborn), checkpoint("ask", summary="go on?")],
    edges=[edge("work", "ask")],
)
"""


@pytest.fixture
def slow(project: Project) -> Project:
    project.env.update(SLOW_RENEWAL)
    return project


@pytest.mark.timeout(90)
def test_cancel_stops_a_running_shell_step_at_once(slow: Project) -> None:
    slow.write_workflow("long", SHELL)
    slow.start_host()
    run_id = slow.detach("long")
    wait_for(lambda: slow.lines("long.pid"), what="the shell step to start")
    shell_pid = int(slow.lines("long.pid")[0])
    out = json.loads(slow.cli("cancel", run_id, "--json").stdout)
    assert out["state"] == "cancelled" and out["stopped"] is True, out
    assert out["runStatus"] == "cancelled"
    wait_for(lambda: not alive(shell_pid), 10, what="the shell's process group to be stopped")
    assert not (slow.root / "never.ran").exists()  # no node started after the cancel
    assert [e["type"] for e in slow.events(run_id)][-1] == "run_cancelled"


@pytest.mark.timeout(90)
def test_a_cancel_wins_over_a_checkpoint_even_if_the_node_ignores_it(slow: Project) -> None:
    slow.write_workflow("stub", STUBBORN)
    slow.start_host()
    run_id = slow.detach("stub")
    wait_for(lambda: (slow.root / "stubborn.started").exists(), what="the node to start")
    proc = slow.cli("cancel", run_id)
    assert proc.stdout.strip() == f"{run_id}: cancelled", proc.stdout
    slow.release()
    row = slow.row(run_id)
    assert row.state == "cancelled"
    types = [e["type"] for e in slow.events(run_id)]
    assert "run_waiting" not in types and types[-1] == "run_cancelled"
    assert [e["nodeId"] for e in slow.events(run_id) if e["type"] == "node_started"] == ["work"]


@pytest.mark.timeout(90)
def test_cancel_of_an_attached_run_ends_its_terminal_with_exit_1(slow: Project) -> None:
    slow.write_workflow("flow", FLOW)
    term = Terminal(slow, "run", "flow", "hold")
    try:
        wait_for(lambda: slow.lines("hold.started"), what="the held node to run")
        run_id = slow.store().list_runs()[0].run_id
        assert slow.cli("cancel", run_id).stdout.strip() == f"{run_id}: cancelled"
        assert term.proc.wait(30) == 1
    finally:
        term.close()
    assert slow.row(run_id).state == "cancelled"


@pytest.mark.timeout(90)
def test_cancelling_a_waiting_run_closes_its_wait_for_good(project: Project) -> None:
    project.write_workflow("flow", FLOW)
    project.start_host()
    run_id = project.detach("flow", {"task": "ask"})
    wait_for(lambda: project.row(run_id).state == "done", what="the run to wait")
    assert project.state(run_id)["status"] == "waiting"
    proc = project.cli("cancel", run_id)
    assert proc.stdout.strip() == f"{run_id}: cancelled while it waited"
    status = json.loads(project.cli("status", run_id, "--json").stdout)
    assert status["runStatus"] == "cancelled" and status["waitingOn"] is None
    listed = project.cli("list").stdout
    assert run_id in listed and "cancelled" in listed.split(run_id)[1].splitlines()[0]
    answered = project.cli("answer", run_id, "yes", check=False)
    assert answered.returncode == 2
    assert "was cancelled while it waited" in answered.stderr
    assert len(answered.stderr.strip().splitlines()) == 1
    assert project.cli("watch", run_id, check=False).returncode == 1
    again = project.cli("cancel", run_id)  # idempotent: still cancelled, nothing new
    assert again.stdout.strip() == f"{run_id}: cancelled while it waited"
    assert [r.run_id for r in project.store().list_runs()] == [run_id]  # no continuation


@pytest.mark.timeout(90)
def test_cancelling_an_answered_parent_names_its_continuation(project: Project) -> None:
    project.write_workflow("flow", FLOW)
    run_id = project.detach("flow", {"task": "ask"})
    project.start_host()
    wait_for(lambda: project.row(run_id).state == "done", what="the run to wait")
    child = json.loads(project.cli("answer", run_id, "yes", "--json").stdout)["runId"]
    proc = project.cli("cancel", run_id, check=False)
    assert proc.returncode == 2 and child in proc.stderr


EFFECT = """
from pi_workflows import define_workflow, shell

workflow = define_workflow(
    start_at="charge",
    nodes=[shell("charge", "echo start >> ledger; "
                 "while [ ! -e release ]; do sleep 0.02; done; echo end >> ledger")],
)
"""


@pytest.mark.timeout(90)
def test_a_cancel_during_a_host_drain_still_cancels_the_run(slow: Project) -> None:
    slow.write_workflow("pay", EFFECT)
    host = slow.start_host()
    run_id = slow.detach("pay")
    wait_for(lambda: slow.lines("ledger") == ["start"], what="the effect to start")
    host.send_signal(signal.SIGTERM)  # a drain: the effect gets its grace to finish
    out = json.loads(slow.cli("cancel", run_id, "--json").stdout)
    assert (out["state"], out["runStatus"]) == ("cancelled", "cancelled"), out
    host.wait(30)
    assert slow.row(run_id).state == "cancelled"
    assert [e["type"] for e in slow.events(run_id)][-1] == "run_cancelled"


@pytest.mark.timeout(90)
def test_cancelling_a_queued_fork_settles_its_bundle_too(project: Project) -> None:
    project.write_workflow("flow", FLOW)
    host = project.start_host()
    run_id = project.detach("flow", {"task": "fail"})
    wait_for(lambda: project.row(run_id).state == "failed", what="the run to fail")
    project.stop_host(host)
    fork = project.cli("fork", run_id).stdout.strip()
    assert project.row(fork).state == "queued"
    assert project.cli("cancel", fork).stdout.strip() == f"{fork}: cancelled"
    assert project.state(fork)["status"] == "cancelled"
    assert [e["type"] for e in project.events(fork)][-1] == "run_cancelled"
    line = project.cli("status", fork).stdout.splitlines()[0]
    assert "cancelled/running" not in line and " cancelled" in line
