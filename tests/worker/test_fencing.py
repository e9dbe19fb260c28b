"""A stale writer whose claim a real second process took over can write nothing."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from pi_workflows.protocol.bundlewriter import BundleWriter
from pi_workflows.protocol.errors import ClaimLost
from pi_workflows.protocol.store import Store
from pi_workflows.worker.runner import execute_claim

from tests.helpers import children, processes
from tests.helpers.engine import GATES, Harness, assert_well_formed, bundle_bytes

HOLD = """
def step(name):
    def fn(ctx):
        release = h.GATES.get("release")  # set only in the test's own process
        if name == "b" and release is not None:
            h.GATES["in_b"].set()
            release.wait(60)
        return {"node": name}
    return fn

workflow = define_workflow(
    start_at="a",
    nodes=[compute(n, step(n)) for n in "abc"],
    edges=[edge("a", "b"), edge("b", "c")],
)
"""


@pytest.mark.slow  # a real second runner process takes over
@pytest.mark.timeout(90)
def test_a_stale_writer_cannot_append_repair_or_finish(tmp_path: Path) -> None:
    h = Harness(tmp_path, lease_ms=1_000)
    try:
        h.write("hold", HOLD)
        run_id = h.launch("hold")
        proc, conn = processes.start_with_pipe(children.take_over_later, str(h.store_path),
                                               str(h.runs), str(h.project), run_id)
        try:
            assert processes.recv(conn) == "ready"
            _check_stale_writer(h, run_id, conn)
            conn.send("exit")
            processes.stop(proc)
        finally:
            processes.reap(proc)
    finally:
        h.close()


def _check_stale_writer(h: Harness, run_id: str, conn: Any) -> None:
    GATES.update(in_b=threading.Event(), release=threading.Event())
    stale: dict[str, Any] = {}

    def old_owner() -> None:
        # Its own connection: a store is used by one thread. The lease is never renewed.
        with Store(h.store_path, lease_ms=1_000) as store:
            claim = store.claim_by_id(run_id, "runner-old")
            stale["token"] = claim.token
            try:
                execute_claim(store, claim, runs_dir=h.runs, project_dir=h.project,
                              fsync="never")
            except BaseException as exc:
                stale["error"] = exc

    thread = threading.Thread(target=old_owner)
    thread.start()
    assert GATES["in_b"].wait(30), "the old owner never reached node b"
    conn.send("take")
    new_token = processes.recv(conn)  # the child claimed the run after the lease ran out
    old_token = stale["token"]
    assert new_token != old_token
    row = h.row(run_id)
    assert (row.runner_id, row.claim_token, row.state) == ("runner-new", new_token, "running")

    bundle = h.bundle(run_id)
    # A torn append, as a crash would leave it: only the current owner may cut it off.
    with bundle.trace_path.open("ab") as fh:
        fh.write(b'{"seq":5,"type":"node_fin')
    before = bundle_bytes(bundle)
    assert assert_well_formed_prefix(bundle) == ["run_started", "node_started",
                                                 "node_finished", "node_started"]

    # 1. The stale engine's next append (b finished) is fenced out.
    GATES["release"].set()
    thread.join(30)
    assert not thread.is_alive()
    assert isinstance(stale.get("error"), ClaimLost), stale
    assert bundle_bytes(bundle) == before

    # 2. Its writer can neither repair (reopen) nor append nor record processes.
    writer = BundleWriter(bundle, h.store, old_token, fsync="never")
    with pytest.raises(ClaimLost):
        writer.reopen()
    writer.seq = 4
    with pytest.raises(ClaimLost):
        writer.append("node_finished", {"result": {"outcome": "ok"}}, {"status": "running"},
                      node_id="b")
    with pytest.raises(ClaimLost):
        writer.write_processes({"worker": {"pid": 1}})
    assert bundle_bytes(bundle) == before
    assert not bundle.processes_path.exists()

    # 3. The queue refuses every lifecycle change under the old token.
    for op in (lambda: h.store.finish(run_id, old_token),
               lambda: h.store.park(run_id, old_token),
               lambda: h.store.fail(run_id, old_token, "stale", "stale"),
               lambda: h.store.renew(run_id, old_token),
               lambda: h.store.cancel(run_id, old_token)):
        with pytest.raises(ClaimLost):
            op()
    assert (h.row(run_id).state, h.row(run_id).claim_token) == ("running", new_token)

    # 4. The new owner resumes: it repairs the tail and finishes the run.
    conn.send("run")
    assert processes.recv(conn) == "completed"
    events = assert_well_formed(bundle)
    resumed = [e for e in events if e["type"] == "run_resumed"]
    assert len(resumed) == 1 and resumed[0]["payload"]["droppedTraceLines"] == 1
    assert resumed[0]["payload"]["resumePoint"] == "b"
    assert [e["nodeId"] for e in events if e["type"] == "node_finished"] == ["a", "b", "c"]
    assert bundle.state()["finalOutput"] == {"node": "c"}
    assert h.row(run_id).state == "done"


def assert_well_formed_prefix(bundle: Any) -> list[str]:
    """The valid lines of a trace that may end torn."""
    return [e["type"] for e in bundle.scan().events]
