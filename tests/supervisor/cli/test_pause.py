"""``pause`` and ``resume`` from a terminal, and ``paused`` in every view.

A queued run is paused at once; a running one is asked (``--no-wait``); a
run paused at a boundary reads ``paused`` in ``status``, ``status --json``,
``list`` and ``list --state paused``, and ``watch`` ends on it with exit 4;
``resume`` frees it for a host; ``cancel`` ends it; a run that ended is
refused with one line and exit 2.
"""

from __future__ import annotations

import json
import threading

import pytest
from pi_workflows.protocol.states import QueueState
from pi_workflows.protocol.store import Store
from pi_workflows.worker.runner import execute_claim

from tests.helpers.cli import run_cli
from tests.helpers.engine import GATES, Harness
from tests.helpers.waiting import poll

pytestmark = pytest.mark.timeout(60)

FLOW = """
def first(ctx):
    h.GATES["store"].request_pause(ctx.run_id)
    return {"a": 1}

workflow = define_workflow(
    start_at="a",
    nodes=[compute("a", first), compute("b", lambda ctx: {"b": 2})],
    edges=[edge("a", "b")],
)
"""


def _paused_at_b(h: Harness) -> str:
    h.write("flow", FLOW)
    run_id = h.launch("flow")
    GATES["store"] = h.store
    assert h.execute(run_id).error_code == "paused"
    return run_id


def test_a_paused_run_reads_paused_everywhere_and_resume_frees_it(cli: Harness) -> None:
    run_id = _paused_at_b(cli)
    project = ("--project", str(cli.project))
    shown = run_cli("status", run_id, *project)
    assert shown.returncode == 0, shown.stderr
    assert "paused before b: no runner takes it until it is resumed" in shown.stdout
    assert f"pi-workflows resume {run_id}" in shown.stdout
    data = json.loads(run_cli("status", run_id, "--json", *project).stdout)
    assert (data["paused"], data["pauseRequested"], data["queueState"]) == (True, False,
                                                                            "parked")
    listed = run_cli("list", "--state", "paused", *project)
    assert listed.returncode == 0, listed.stderr
    assert run_id in listed.stdout and "paused" in listed.stdout
    watched = run_cli("watch", run_id, *project)
    assert watched.returncode == 4
    assert "paused; `pi-workflows resume" in watched.stdout and "continues it" in watched.stdout
    resumed = run_cli("resume", run_id, *project)
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed, parked and ready" in resumed.stdout
    row = cli.row(run_id)
    assert (row.state, row.error_code) == ("parked", None)
    assert cli.store.claim_next("host-1") is not None


def test_pause_holds_a_queued_run_at_once_and_cancel_ends_it(cli: Harness) -> None:
    cli.write("flow", FLOW)
    run_id = cli.launch("flow")
    project = ("--project", str(cli.project))
    done = run_cli("pause", run_id, *project)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"{run_id}: paused; `pi-workflows resume {run_id} ")
    assert cli.store.claim_next("host-1") is None
    again = json.loads(run_cli("pause", run_id, "--json", *project).stdout)
    assert (again["paused"], again["state"]) == (True, "queued")
    assert run_cli("cancel", run_id, *project).returncode == 0
    assert cli.row(run_id).state == QueueState.CANCELLED


def test_pause_no_wait_of_a_running_run_says_the_step_finishes_first(cli: Harness) -> None:
    cli.write("flow", FLOW)
    run_id = cli.launch("flow")
    cli.store.mark_running(run_id, cli.store.claim_by_id(run_id, "runner-1").token)
    done = run_cli("pause", run_id, "--no-wait", "--project", str(cli.project))
    assert done.returncode == 0, done.stderr
    assert "pause requested; the step in progress finishes, then the run holds" in done.stdout
    shown = run_cli("status", run_id, "--project", str(cli.project))
    assert "pause requested" in shown.stdout
    withdrawn = run_cli("resume", run_id, "--project", str(cli.project))
    assert withdrawn.returncode == 0, withdrawn.stderr
    assert "pause withdrawn" in withdrawn.stdout
    assert cli.row(run_id).error_code is None


def test_pause_waits_for_a_running_run_to_reach_its_boundary(cli: Harness) -> None:
    GATES.update(go=threading.Event(), store=cli.store)
    cli.write("slow", """
def first(ctx):
    h.GATES["go"].wait(30)
    return {"a": 1}

workflow = define_workflow(
    start_at="a",
    nodes=[compute("a", first), compute("b", lambda ctx: {"b": 2})],
    edges=[edge("a", "b")],
)
""")
    run_id = cli.launch("slow")
    claim = cli.store.claim_by_id(run_id, "runner-1")

    def work() -> None:  # a worker of its own, with its own connection
        with Store(cli.store_path) as store:
            execute_claim(store, claim, runs_dir=cli.runs, project_dir=cli.project,
                          fsync="never")

    worker = threading.Thread(target=work)
    worker.start()
    try:
        assert poll(lambda: cli.row(run_id).state == QueueState.RUNNING, 20)
        threading.Timer(0.3, GATES["go"].set).start()
        done = run_cli("pause", run_id, "--json", "--project", str(cli.project))
    finally:
        GATES["go"].set()
        worker.join(30)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["paused"] is True


@pytest.mark.parametrize("state", ["completed", "waiting"])
def test_pause_of_a_run_that_ended_or_waits_is_refused_in_one_line(
        cli: Harness, state: str) -> None:
    cli.write("ends", """
workflow = define_workflow(start_at="a", nodes=[compute("a", lambda ctx: {"a": 1})], edges=[])
""" if state == "completed" else """
workflow = define_workflow(start_at="ask", nodes=[checkpoint("ask", summary="go?")], edges=[])
""")
    run_id = cli.launch("ends")
    cli.execute(run_id)
    done = run_cli("pause", run_id, "--project", str(cli.project))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr
    assert ("waiting at a checkpoint" if state == "waiting" else "already completed") in lines[0]
