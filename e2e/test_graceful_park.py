"""Graceful stops let a running non-idempotent effect finish; hard kills do not.

The rule (docs/host.md): Ctrl-C of an attached run, SIGTERM of a worker and
a host drain give a running action or shell effect up to ``drain_grace_s``
to finish; it is recorded ``applied`` and the run parks after it, so the
resumed run never repeats it and never calls it indeterminate. A kill -9,
or a grace that runs out, leaves the effect ``indeterminate``.
"""

from __future__ import annotations

import os
import signal

import pytest

from .harness import Project, alive, wait_for
from .sessions_kit import Terminal

pytestmark = pytest.mark.slow  # real processes: an e2e drill

EFFECT = """
from pi_workflows import define_workflow, shell, compute, edge

workflow = define_workflow(
    start_at="charge",
    nodes=[
        shell("charge", "echo $$ > charge.pid; echo start >> ledger; "
              "while [ ! -e release ]; do sleep 0.02; done; echo end >> ledger"),
        compute("after", lambda ctx: {"ok": True}),
    ],
    edges=[edge("charge", "after")],
)
"""


def _effects(project: Project, run_id: str) -> list[str]:
    return [e["state"] for e in project.state(run_id).get("effects", {}).values()]


@pytest.mark.timeout(120)
def test_ctrl_c_of_an_attached_run_lets_the_effect_finish_then_parks(project: Project) -> None:
    project.write_workflow("pay", EFFECT)
    term = Terminal(project, "run", "pay")
    try:
        wait_for(lambda: project.lines("ledger") == ["start"], what="the effect to start")
        run_id = project.store().list_runs()[0].run_id
        term.type(b"\x03")
        term.wait_line("parking the run", 10)
        project.release()
        assert term.proc.wait(30) == 4, term.text()
    finally:
        term.close()
    assert project.lines("ledger") == ["start", "end"]
    assert project.row(run_id).state == "parked"
    project.start_host()
    wait_for(lambda: project.row(run_id).state == "done", what="the host to finish the run")
    assert project.lines("ledger") == ["start", "end"]  # applied once, never repeated
    assert project.state(run_id)["finalOutput"] == {"ok": True}


@pytest.mark.timeout(120)
def test_a_host_drain_lets_the_effect_finish_then_parks(project: Project) -> None:
    project.write_workflow("pay", EFFECT)
    host = project.start_host()
    run_id = project.detach("pay")
    wait_for(lambda: project.lines("ledger") == ["start"], what="the effect to start")
    host.send_signal(signal.SIGTERM)
    project.release()
    host.wait(30)
    assert project.lines("ledger") == ["start", "end"]
    assert project.row(run_id).state == "parked"
    project.start_host()
    wait_for(lambda: project.row(run_id).state == "done", what="a new host to finish the run")
    assert project.lines("ledger") == ["start", "end"]


@pytest.mark.timeout(120)
def test_a_grace_that_runs_out_leaves_the_effect_indeterminate(project: Project) -> None:
    project.env["PI_WORKFLOWS_DRAIN_GRACE_S"] = "0.3"
    project.write_workflow("pay", EFFECT)
    host = project.start_host()
    run_id = project.detach("pay")
    wait_for(lambda: project.lines("ledger") == ["start"], what="the effect to start")
    host.send_signal(signal.SIGTERM)
    host.wait(30)
    assert project.row(run_id).state == "parked"
    project.release()
    project.start_host()
    wait_for(lambda: project.row(run_id).state == "failed", what="the resumed run to fail")
    assert project.row(run_id).error_code == "effect_indeterminate"
    assert project.lines("ledger") == ["start"]  # never rerun: it may have happened


@pytest.mark.timeout(120)
def test_a_hard_kill_leaves_the_effect_indeterminate(project: Project) -> None:
    project.write_workflow("pay", EFFECT)
    project.start_host()
    run_id = project.detach("pay")
    wait_for(lambda: project.lines("ledger") == ["start"], what="the effect to start")
    worker = next(p for p in project.state_processes(run_id) if p["role"] == "worker")
    os.kill(worker["pid"], signal.SIGKILL)  # no grace at all; the host restarts the run
    shell = int(project.lines("charge.pid")[0])
    # The host kills what the dead worker left running before it reruns anything.
    wait_for(lambda: not alive(shell), what="the effect's shell to be stopped")
    project.release()
    wait_for(lambda: project.row(run_id).state == "failed", what="the resumed run to fail")
    assert project.row(run_id).error_code == "effect_indeterminate"
    assert project.lines("ledger") == ["start"]  # never rerun: it may have happened
