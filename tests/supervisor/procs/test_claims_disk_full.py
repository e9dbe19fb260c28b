"""Recording a failure into a bundle on a full disk (issue 21 item 14), on a real tmpfs.

The host records a crash loop with ``fail_claimed``: reopen (which repairs a
torn trace tail by rewriting the trace) and the terminal event. On a full
filesystem each write raises ``ENOSPC``; that used to escape the host's
serving loop (exit 70, on every restart). Now the run is parked blocked
with ``disk_full`` and freed once a probe write fits again. Skipped where
this process may not mount a tmpfs (it needs root or CAP_SYS_ADMIN).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pi_workflows.protocol.bundle import Bundle
from pi_workflows.protocol.bundlewriter import BundleWriter
from pi_workflows.protocol.spawn import spawn
from pi_workflows.protocol.store import Claim, Store
from pi_workflows.supervisor.drill.smalldisk import fill, free, mount_tmpfs, unmount
from pi_workflows.supervisor.host.diskgate import DiskGate
from pi_workflows.supervisor.procs.claims import fail_claimed

from tests.helpers.clocks import FakeClock
from tests.helpers.fake_os import enqueue

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "disk"
    why = mount_tmpfs(mount, 1024 * 1024)
    if why is not None:
        pytest.skip(why)
    try:
        yield mount
    finally:
        unmount(mount)  # never leave a tmpfs behind


def _running_bundle(store: Store, runs: Path) -> Claim:
    enqueue(store, "r1")
    claim = store.claim_next("host-1")
    assert claim is not None
    store.mark_running("r1", claim.token)
    writer = BundleWriter(Bundle(runs, "r1"), store, claim.token, fsync="never")
    state = {"status": "running", "currentNode": "a", "outputs": {}, "results": {}}
    writer.create({"workflow": "w"}, {"nodes": []}, state)
    writer.append("run_started", {"startAt": "a"}, state)
    writer.append("node_started", {}, state, node_id="a", attempt_id="a1")
    # A torn tail, as a worker killed mid-append leaves it: reopen rewrites the trace.
    with open(writer.bundle.trace_path, "ab") as fh:
        fh.write(b'{"seq": 3, "ty')
    return claim


def test_a_crash_loop_recorded_on_a_full_disk_parks_the_run_disk_full(
        tmp_path: Path, small_disk: Path) -> None:
    runs = small_disk / "runs"
    with Store(tmp_path / "store.sqlite3", lease_ms=60_000) as store:
        claim = _running_bundle(store, runs)
        filler = small_disk / "filler"
        fill(filler)
        parked = fail_claimed(store, runs, claim, "worker_crash_loop", "crashed 3 times",
                              lock_timeout=1.0)
        row = store.get("r1")
        assert parked == "disk_full"
        assert row is not None and row.state == "parked" and row.error_code == "disk_full"
        assert "worker_crash_loop" in (row.error_message or "")
        assert "filesystem is full" in (row.error_message or "")
        gate = DiskGate(runs, FakeClock(0.0))
        assert gate.release(store) == 0 and gate.full  # still full: nothing is freed
        free(filler)
        assert gate.release(store) == 1
        row = store.get("r1")
        assert row is not None and row.state == "parked" and row.error_code is None


def test_a_failure_that_a_read_only_bundle_cannot_record_parks_it_for_a_person(
        tmp_path: Path, small_disk: Path) -> None:
    runs = small_disk / "runs"
    with Store(tmp_path / "store.sqlite3", lease_ms=60_000) as store:
        claim = _running_bundle(store, runs)
        remount = spawn(["mount", "-o", "remount,ro", str(small_disk)])
        assert remount.wait(30) == 0
        parked = fail_claimed(store, runs, claim, "worker_crash_loop", "crashed 3 times",
                              lock_timeout=1.0)
        row = store.get("r1")
        assert parked == "worker_crash_loop"
        assert row is not None and row.state == "parked"
        assert row.error_code == "worker_crash_loop"  # blocked: EROFS is not waited out
        assert "resume r1" in (row.error_message or "")
