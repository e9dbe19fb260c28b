"""Recovery drills: kill -9 of the host, a stalled worker, a locked store."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest
from pi_workflows.protocol.errors import TransitionRefused
from pi_workflows.protocol.store import Claim, Store
from pi_workflows.protocol.wire import TOKEN_ENV, WorkerExit, worker_argv

from tests.helpers.processes import reap

from .harness import Project, alive, wait_for
from .snippets import HOLD

pytestmark = pytest.mark.slow  # real processes: an e2e drill

LEAVER = HOLD + """
from pi_workflows import define_workflow, compute, shell, edge

workflow = define_workflow(
    start_at="first",
    nodes=[
        shell("first", "echo once >> first.txt"),
        # A grandchild in its own session: it leaves the worker's process group.
        # It writes its pid only once setsid() is done, and the node waits for that.
        shell("spawn", "setsid sh -c 'echo $$ > gc.$PPID.tmp; exec sleep 300'"
                       " > /dev/null 2>&1 < /dev/null &"
                       " while [ ! -s gc.$$.tmp ]; do sleep 0.01; done;"
                       " cat gc.$$.tmp >> grandchild.pid; rm gc.$$.tmp"),
        compute("hold", hold("hold")),
        shell("last", "echo once >> last.txt"),
    ],
    edges=[edge("first", "spawn"), edge("spawn", "hold"), edge("hold", "last")],
)
"""


@pytest.mark.timeout(120)
def test_host_kill9_reaps_repairs_and_takes_over_at_once(project: Project) -> None:
    # A lease far longer than the test: recovery must come from proof of death.
    project.env["PI_WORKFLOWS_LEASE_MS"] = "600000"
    project.env["PI_WORKFLOWS_RENEW_MS"] = "100000"
    project.write_workflow("leaver", LEAVER)
    host = project.start_host("--concurrency", "3")
    runs = [project.detach("leaver") for _ in range(3)]
    wait_for(lambda: len(project.lines("hold.started")) == 3, what="three runs holding")
    workers = {r: p["pid"] for r in runs for p in project.state_processes(r)
               if p["role"] == "worker"}
    grandchildren = [int(x) for x in project.lines("grandchild.pid")]
    assert len(workers) == 3 and len(grandchildren) == 3
    # Two workers are frozen, so they cannot park when the host dies: they stay
    # behind as orphans that still hold the dead host's claims. The third parks.
    frozen, parking = runs[:2], runs[2]
    for run_id in frozen:
        os.kill(workers[run_id], signal.SIGSTOP)
    os.kill(host.pid, signal.SIGKILL)
    host.wait()
    wait_for(lambda: not alive(workers[parking]), timeout=20, what="the free worker to park")
    assert project.row(parking).state == "parked"
    assert all(project.row(r).state == "running" for r in frozen)
    assert all(alive(pid) for pid in grandchildren), project.diagnose(runs)
    # A torn tail, as a kill -9 in the middle of an append leaves it.
    with open(project.paths.runs_dir / frozen[0] / "trace.ndjson", "ab") as fh:
        fh.write(b'{"seq": 999, "type": "node_fini')
    project.release()
    new = project.start_host("--concurrency", "3", log="host2.log")
    # The lock file says ready just before the CLI prints its start-up report.
    wait_for(lambda: "took over" in new.log_text(), timeout=10, what="the start-up report")
    assert "reaped 5 orphan process(es); took over 2 run(s)" in new.log_text(), new.log_text()
    for pid in [*grandchildren, *(workers[r] for r in frozen)]:
        wait_for(lambda pid=pid: not alive(pid), timeout=10, what=f"orphan {pid} reaped")
    wait_for(lambda: all(project.row(r).state == "done" for r in runs), timeout=60,
             what="all runs done under the new host", diag=lambda: project.diagnose(runs))
    for run_id in runs:
        events = project.events(run_id)
        assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
        assert events[-1]["type"] == "run_completed"
        resumed = [e for e in events if e["type"] == "run_resumed"]
        assert len(resumed) == 1 and resumed[0]["payload"]["resumePoint"] == "hold"
    assert next(e for e in project.events(frozen[0]) if e["type"] == "run_resumed")[
        "payload"]["droppedTraceLines"] == 1
    # No applied effect ran twice.
    assert len(project.lines("first.txt")) == 3
    assert len(project.lines("last.txt")) == 3
    assert len(project.lines("grandchild.pid")) == 3
    with project.store() as store:
        moved = {e.run_id for e in store.events_since(0)
                 if e.type == "claim_taken_over" and e.payload.get("reason") == "runner_dead"}
    assert moved == set(frozen)  # by proof of death, long before the 600 s lease



STALL = HOLD + """
from pi_workflows import define_workflow, compute, edge
workflow = define_workflow(
    start_at="hold",
    nodes=[compute("hold", hold("hold")), compute("after", lambda ctx: {"after": True})],
    edges=[edge("hold", "after")],
)
"""


@pytest.mark.timeout(90)
def _projection(project: Project, run_id: str) -> tuple[bytes, ...]:
    """The trace and the projection's files (``state.json`` and its journal), as bytes."""
    bundle = project.paths.runs_dir / run_id
    return tuple((bundle / name).read_bytes() if (bundle / name).exists() else b""
                 for name in ("trace.ndjson", "state.json", "state.ndjson"))


def test_stopped_worker_loses_its_claim_and_writes_nothing(project: Project) -> None:
    project.env["PI_WORKFLOWS_LEASE_MS"] = "1500"
    project.env["PI_WORKFLOWS_RENEW_MS"] = "300"
    project.write_workflow("stall", STALL)
    run_id = project.detach("stall")
    # A long first lease: a worker that boots slowly on a loaded machine must
    # still find its claim; its own renewals then keep it on the 1.5 s lease.
    with Store(project.paths.store_file, lease_ms=60_000) as store:
        claim = store.claim_by_id(run_id, "stale-runner")
    worker = subprocess.Popen(
        worker_argv(project.root, "stale-runner", os.getpid(), run_id=run_id,
                    claim_state="starting"),
        env={**project.env, TOKEN_ENV: claim.token}, start_new_session=True)
    try:
        wait_for(lambda: len(project.lines("hold.started")) == 1, what="node hold running")
        # Renewed at least once: it holds the claim on its own now.
        wait_for(lambda: project.row(run_id).lease_expires_at != claim.lease_expires_at,
                 timeout=30, what="the worker's first renewal")
        os.kill(worker.pid, signal.SIGSTOP)
        before = _projection(project, run_id)
        with Store(project.paths.store_file, lease_ms=1500) as store:
            # Another runner takes the claim once it watched it go 1.5 s (a lease of
            # its own monotonic time) without a renewal; refused until then.
            def take() -> Claim | None:
                try:
                    return store.claim_by_id(run_id, "new-runner")
                except TransitionRefused:
                    return None

            taken = wait_for(take, timeout=10, what="the stalled worker's claim to be taken")
        assert taken.previous_state == "running"
        project.release()
        os.kill(worker.pid, signal.SIGCONT)
        assert worker.wait(30) == WorkerExit.CLAIM_LOST
        after = _projection(project, run_id)
        assert after == before
        row = project.row(run_id)
        assert row.state == "running" and row.claim_token == taken.token
    finally:
        reap(worker)


LOCKER = textwrap.dedent("""
    import sqlite3, sys, time
    conn = sqlite3.connect(sys.argv[1], isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    print("locked", flush=True)
    time.sleep(float(sys.argv[2]))
    conn.execute("ROLLBACK")
""")

QUICK2 = HOLD + """
from pi_workflows import define_workflow, compute, edge
workflow = define_workflow(
    start_at="hold",
    nodes=[compute("hold", hold("hold")), compute("two", lambda ctx: {"two": 2})],
    edges=[edge("hold", "two")],
)
"""


@pytest.mark.timeout(120)
def test_workers_back_off_while_the_store_is_locked_and_finish(project: Project) -> None:
    # Who must wait out the lock: each worker, whose run ends while the store
    # is locked and must write "done" (and renew every 300 ms). The host has
    # both its slots full, so it writes only its 5-s heartbeat, which may fall
    # outside the 5-s lock: whether it backs off is left to timing, not asserted.
    project.env["PI_WORKFLOWS_BUSY_TIMEOUT_MS"] = "100"
    project.env["PI_WORKFLOWS_LEASE_MS"] = "20000"
    project.env["PI_WORKFLOWS_RENEW_MS"] = "300"
    project.write_workflow("quick", QUICK2)
    host = project.start_host("--concurrency", "2")
    runs = [project.detach("quick") for _ in range(2)]
    wait_for(lambda: len(project.lines("hold.started")) == 2, what="runs holding")
    workers = {r: p["pid"] for r in runs for p in project.state_processes(r)
               if p["role"] == "worker"}
    assert len(workers) == 2
    locker = subprocess.Popen([sys.executable, "-c", LOCKER, str(project.paths.store_file), "5"],
                              stdout=subprocess.PIPE, text=True)
    assert locker.stdout is not None and locker.stdout.readline().strip() == "locked"
    project.release()  # the nodes finish while the store is locked
    assert locker.wait(30) == 0
    wait_for(lambda: all(project.row(r).state == "done" for r in runs), what="runs done",
             diag=lambda: project.diagnose(runs))
    log = project.log_lines()
    for run_id, pid in workers.items():
        # Its own log lines (role and pid), not just anyone's "busy".
        busy = [line for line in log if f" worker[{pid}] " in line and "store busy" in line]
        assert busy, f"worker {pid} of {run_id} never backed off:\n" + "\n".join(log[-40:])
        assert project.state(run_id)["status"] == "completed"
        # The same worker finished the run: waiting did not crash it into a restart.
        assert [p["pid"] for p in project.state_processes(run_id)
                if p["role"] == "worker"] == [pid]
    assert host.poll() is None
