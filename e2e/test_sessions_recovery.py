"""Session launches and runs that crash: every activation boundary is recovered, a
notification survives a killed worker, and a parked run of a busy session is cancelled."""

from __future__ import annotations

import json
import signal
import subprocess

import pytest
from pi_workflows.protocol.bundle import bundle_exists

from .harness import Project, alive, wait_for
from .sessions_kit import (
    FLOW,
    NOTIFY_HOLD,
    QUICK,
    SLOW_LOAD,
    Children,
    crash,
    query,
    run_id,
    store_events,
    sync_json,
    sync_lines,
    worker_of,
)

pytestmark = pytest.mark.slow  # real processes: an e2e drill


def _activate_again(project: Project, run: str, token: str) -> subprocess.CompletedProcess[str]:
    """``activate`` at once: the dead claim's holder is gone (its process died, or it
    never registered as a runner), which is proof enough; no lease has to lapse,
    and no wall clock decides it."""
    assert project.row(run).claim_token == token  # nothing took it meanwhile
    return project.cli("activate", "--session", "s1", check=False)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("boundary", ["starting", "running"])
def test_an_activation_killed_at_a_boundary_is_recovered_by_the_next_activate(
        project: Project, children: Children, boundary: str) -> None:
    project.env.update(PI_WORKFLOWS_LEASE_MS="3000", PI_WORKFLOWS_RENEW_MS="300")
    if boundary == "starting":  # claimed, the worker still loading: no bundle yet
        project.write_workflow("slow", SLOW_LOAD)
        run = run_id(project.cli("start", "slow", "--session", "s1", "--json"))
        (project.root / "block-load").write_text("")
        marker = "load.started"
    else:  # past the final fence, a node running
        project.write_workflow("flow", FLOW)
        run = run_id(project.cli("start", "flow", "hold", "--session", "s1", "--json"))
        marker = "hold.started"
    proc = children.start("activate1", "activate", "--session", "s1")
    wait_for(lambda: project.lines(marker), what=f"the activation at {boundary}")
    worker = worker_of(proc)
    crash(proc, worker)
    row = project.row(run)
    assert row.state == boundary and row.claim_token is not None
    assert bundle_exists(project.paths.runs_dir, run) == (boundary == "running")
    assert row.lease_expires_at is not None
    (project.root / "release-load").write_text("")
    project.release()
    done = _activate_again(project, run, row.claim_token)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1].endswith("completed: {\"ok\": " + (
        "1}" if boundary == "starting" else "true}")), done.stdout
    assert project.row(run).state == "done" and not alive(worker.pid)
    events = store_events(project, run)
    assert [e["type"] for e in project.events(run)].count("run_started") == 1
    if boundary == "starting":
        assert ("queued", {"from": "starting", "reason": "runner_dead"}) in events
        assert len(project.lines("one.ran")) == 1
        assert [k for k, _ in events] == ["queued", "starting", "queued", "starting",
                                          "running", "done"]
    else:
        taken = [p for k, p in events if k == "claim_taken_over"]
        assert len(taken) == 1 and taken[0]["from"] == "running", events
        assert len(project.lines("hold.started")) == 2  # the held node ran again, once


@pytest.mark.timeout(90)
def test_a_starting_row_left_without_a_bundle_goes_back_to_queued_and_is_activated(
        project: Project) -> None:
    project.env["PI_WORKFLOWS_LEASE_MS"] = "3000"
    project.write_workflow("quick", QUICK)
    run = run_id(project.cli("start", "quick", "--session", "s1", "--json"))
    with project.store() as store:  # an activation that claimed and died at once
        claim = store.claim_by_id(run, "session-ghost-1", session="s1")
    status = json.loads(project.cli("status", "--session", "s1", "--json").stdout)["run"]
    assert (status["runId"], status["queueState"], status["runnerId"]) == (
        run, "starting", "session-ghost-1")
    done = _activate_again(project, run, claim.token)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1].endswith('completed: {"inputBytes": 2, "ok": true}')
    kinds = [(k, p.get("runnerId"), p.get("reason")) for k, p in store_events(project, run)]
    assert kinds[:3] == [("queued", None, None), ("starting", "session-ghost-1", None),
                         ("queued", None, "runner_dead")], kinds
    assert [k for k, _, _ in kinds[3:]] == ["starting", "running", "done"]
    assert project.lines("quick.ran") == [run]


@pytest.mark.timeout(120)
def test_a_notification_reaches_its_session_once_across_a_killed_worker(
        project: Project, children: Children) -> None:
    project.write_workflow("tell", NOTIFY_HOLD)
    run = run_id(project.cli("start", "tell", "--session", "s1", "--json"))
    proc = children.start("activate", "activate", "--session", "s1")
    wait_for(lambda: project.lines("hold.started"), what="the node after the notification")
    sql = "SELECT session_id, delivered_at FROM workflow_notifications WHERE run_id = ?"
    assert [tuple(r) for r in query(project, sql, (run,))] == [("s1", None)]
    worker_of(proc).kill()  # kill -9 between the notification and its delivery
    assert proc.wait(60) == 4, children.output("activate")  # given back, parked
    assert project.row(run).state == "parked"
    project.release()
    project.start_host()
    wait_for(lambda: project.row(run).state == "done", what="the host finished the run",
             diag=lambda: project.diagnose([run]))
    lines = sync_lines(project, "s1")
    assert lines.count(f"[progress] tell ({run}): halfway there") == 1, lines
    assert f'{run}  tell  completed: {{"ok": true}}' in lines
    assert sync_lines(project, "s1") == ["session s1: nothing new since the last sync"]
    assert sync_json(project, "s1")["notifications"] == []
    rows = query(project, sql, (run,))
    assert len(rows) == 1 and rows[0]["delivered_at"] is not None
    assert len(project.lines("hold.started")) == 2


@pytest.mark.timeout(120)
def test_cancel_a_parked_run_while_its_session_has_another_queued_run(
        project: Project, children: Children) -> None:
    project.write_workflow("flow", FLOW)
    project.write_workflow("quick", QUICK)
    proc = children.start("run", "run", "flow", "hold", "--session", "s1")
    wait_for(lambda: project.lines("hold.started"), what="the node running")
    parked = json.loads(project.cli("status", "--session", "s1", "--json").stdout)["run"]
    proc.send_signal(signal.SIGINT)
    assert proc.wait(60) == 4, children.output("run")
    parked_id = parked["runId"]
    assert project.row(parked_id).state == "parked"
    queued = run_id(project.cli("start", "quick", "--session", "s1", "--json"))
    out = json.loads(project.cli("cancel", parked_id, "--json").stdout)
    assert (out["state"], out["cancelRequested"]) == ("cancelled", False)
    state = project.state(parked_id)
    assert state["status"] == "cancelled" and state["error"]["code"] == "cancelled"
    events = project.events(parked_id)
    assert events[-1]["type"] == "run_cancelled"
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    row = project.row(queued)  # the session's reservation is untouched
    assert (row.state, row.origin_session) == ("queued", "s1")
    assert project.cli("activate", "--session", "s1").returncode == 0
    assert project.lines("quick.ran") == [queued]
    assert len(project.lines("hold.started")) == 1  # the cancelled run never ran again
    assert sync_json(project, "s1")["followUps"] == []


@pytest.mark.timeout(120)
def test_a_launch_that_died_after_its_bundle_and_before_the_final_fence_is_resumed(
        project: Project) -> None:
    """The third boundary: claimed, bundle laid out (``run_started``), not yet ``running``."""
    from pi_workflows.protocol.bundle import Bundle
    from pi_workflows.protocol.bundlewriter import BundleWriter
    from pi_workflows.protocol.definitions.discovery import load_workflow_file
    from pi_workflows.protocol.store import Store
    from pi_workflows.worker.engine import Engine

    project.env.update(PI_WORKFLOWS_LEASE_MS="1500")
    project.write_workflow("quick", QUICK)
    run = run_id(project.cli("start", "quick", "--session", "s1", "--json"))
    paths = project.paths
    # What an activating worker leaves when it dies right before mark_running.
    with Store(paths.store_file, lease_ms=1500) as store:
        claim = store.claim_by_id(run, "dead-activator", session="s1")
        row = store.get(run)
        assert row is not None
        loaded = load_workflow_file(row.source_path)
        writer = BundleWriter(Bundle(paths.runs_dir, run), store, claim.token, fsync="never")
        engine = Engine(loaded.workflow, writer, store, project_dir=project.root)
        engine.create(run_input=store.private_input(run, claim.token),
                      source={"path": loaded.source.path, "sha256": loaded.source.sha256},
                      digest=loaded.digest)
    assert project.row(run).state == "starting" and bundle_exists(paths.runs_dir, run)
    # The dead activator never registered as a runner: proof enough, no lease to wait.
    out = project.cli("activate", "--session", "s1", check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    assert project.row(run).state == "done"
    types = [e["type"] for e in project.events(run)]
    assert types.count("run_started") == 1 and "run_resumed" in types, types
    events = [kind for kind, _ in store_events(project, run)]
    assert events[:3] == ["queued", "starting", "claim_taken_over"], events
    assert "failed" not in events and events[-1] == "done"
    assert sync_json(project, "s1")["followUps"] == []  # recovered, not a failed launch
