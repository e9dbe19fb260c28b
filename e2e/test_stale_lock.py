"""A stale writer holding a run's bundle lock: killed by the host, not a crash of the run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest
from pi_workflows.protocol.liveness import host_name, process_start_time
from pi_workflows.protocol.paths import project_key
from pi_workflows.protocol.wire import MARKER_ENV, marker_value

from tests.helpers.processes import reap

from .harness import Project, alive, wait_for
from .snippets import HOLD

pytestmark = pytest.mark.slow  # real processes: an e2e drill

FLOW = """
from pi_workflows import define_workflow, compute, edge

workflow = define_workflow(
    start_at="a",
    nodes=[compute("a", lambda ctx: {"a": 1}), compute("b", lambda ctx: {"b": 2})],
    edges=[edge("a", "b")],
)
"""

HOLDER = textwrap.dedent("""
    import fcntl, os, sys, time
    fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    print("held", flush=True)
    time.sleep(600)
""")


@pytest.mark.timeout(120)
def test_a_frozen_lock_holder_of_a_void_claim_is_killed_and_the_run_completes(
        project: Project) -> None:
    project.env["PI_WORKFLOWS_LOCK_TIMEOUT_S"] = "1"
    project.write_workflow("flow", FLOW)
    run_id = project.detach("flow")
    bundle_dir = project.paths.runs_dir / run_id
    bundle_dir.mkdir(parents=True, mode=0o700)
    # A terminal's worker whose claim is gone, frozen while it held the lock.
    marker = marker_value(project_key(project.root), "session-frozen", run_id)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(bundle_dir / ".bundle.lock")],
                              env={**os.environ, MARKER_ENV: marker}, stdout=subprocess.PIPE,
                              text=True, start_new_session=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        os.kill(holder.pid, signal.SIGSTOP)
        # Its runner is registered and alive (frozen), so it is no orphan to reap at
        # start-up: only the locked bundle tells the host it is in the way.
        with project.store() as store:
            store.register_runner("session-frozen", "session", holder.pid,
                                  process_start_time(holder.pid), host_name())
        project.start_host()
        wait_for(lambda: project.row(run_id).state in ("done", "failed"), timeout=60,
                 what="the run to end", diag=lambda: project.diagnose([run_id]))
        row = project.row(run_id)
        assert (row.state, row.error_code) == ("done", None)
        assert project.state(run_id)["status"] == "completed"
        wait_for(lambda: not alive(holder.pid), what="the stale holder killed")
        assert "stale writer(s) holding its lock" in (project.root / "host.log").read_text()
    finally:
        reap(holder)


HOLD_THEN_B = HOLD + """
from pi_workflows import define_workflow, compute, edge

workflow = define_workflow(
    start_at="a",
    nodes=[compute("a", hold("a")), compute("b", lambda ctx: {"b": 2})],
    edges=[edge("a", "b")],
)
"""


@pytest.mark.timeout(120)
def test_a_stranger_holding_the_lock_parks_the_run_blocked_and_resume_finishes_it(
        project: Project) -> None:
    project.env["PI_WORKFLOWS_LOCK_TIMEOUT_S"] = "1"
    project.write_workflow("flow", HOLD_THEN_B)
    host = project.start_host()
    run_id = project.detach("flow")
    wait_for(lambda: project.lines("a.started"), what="the node to run")
    project.stop_host(host)  # drained: parked, with a bundle
    assert project.row(run_id).state == "parked"
    # A process that is no pi-workflows process (no marker, no record) takes the lock.
    lock = project.paths.runs_dir / run_id / ".bundle.lock"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(lock)], stdout=subprocess.PIPE,
                              text=True, start_new_session=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        project.start_host()
        wait_for(lambda: project.row(run_id).error_code == "bundle_locked", timeout=60,
                 what="the run to be parked blocked", diag=lambda: project.diagnose([run_id]))
        row = project.row(run_id)
        assert row.state == "parked" and f"pid {holder.pid}" in (row.error_message or "")
        assert project.state(run_id)["status"] == "running"  # queue and bundle agree: unsettled
        status = project.cli("status", run_id).stdout
        assert "bundle_locked" in status and f"pid {holder.pid}" in status
        assert alive(holder.pid)  # a stranger is never killed
        log = (project.root / "host.log").read_text()
        assert "crashed" not in log
    finally:
        reap(holder)
    project.release()
    project.cli("resume", run_id)
    wait_for(lambda: project.row(run_id).state == "done", timeout=60, what="the run to finish",
             diag=lambda: project.diagnose([run_id]))
    assert project.state(run_id)["finalOutput"] == {"b": 2}
