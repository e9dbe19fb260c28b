"""A full runs directory in the host's pass: parked ``disk_full``, no crash, waited out.

Driven one ``loop_once`` at a time over the fake OS of ``test_loop.py``; the
probe write is the test's switch (the real probe is tested on a real tmpfs
in ``tests/supervisor/procs/test_claims_disk_full.py`` and e2e). No sleeps.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pi_workflows.protocol.settings import load_settings, resolve_paths
from pi_workflows.protocol.wire import WorkerExit
from pi_workflows.supervisor.host.diskgate import LAST_PROBE_S, DiskGate, probe_space
from pi_workflows.supervisor.host.loop import Host

from tests.helpers.clocks import FakeClock
from tests.helpers.fake_os import FakeOs, enqueue

pytestmark = pytest.mark.timeout(30)


class Space:
    """The probe's answer, set by the test."""

    def __init__(self) -> None:
        self.free = True
        self.probes = 0

    def __call__(self, runs_dir: Path) -> bool:
        self.probes += 1
        return self.free


Rig = tuple[Host, FakeOs, FakeClock[float], Space]


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    fake_os, mono, space = FakeOs(), FakeClock(1000.0), Space()
    settings = load_settings(restart_backoff_s=0, crash_limit=3, crash_window_s=60,
                             lease_ms=10_000, renew_ms=2_000)
    host = Host(resolve_paths(settings, tmp_path), settings, concurrency=2, clock=FakeClock(),
                monotonic=mono, os_layer=fake_os, use_zygote=False)
    host.disk.probe = space
    host.start()
    yield host, fake_os, mono, space
    host.shutdown()


def _bundle_of(host: Host, run_id: str) -> None:
    bundle = host.paths.runs_dir / run_id
    bundle.mkdir(parents=True)
    (bundle / "state.json").write_text('{"status": "running"}')


def test_a_worker_out_of_space_parks_its_run_disk_full_and_spends_no_crash_budget(
        rig: Rig) -> None:
    host, fake_os, mono, space = rig
    fake_os.exit_code = WorkerExit.DISK_FULL
    enqueue(host.store, "r1")
    _bundle_of(host, "r1")
    space.free = False
    for _ in range(10):  # far more passes than the crash limit would allow
        host.loop_once()
    row = host.store.get("r1")
    assert row is not None and row.state == "parked" and row.error_code == "disk_full"
    assert "resumes by itself" in (row.error_message or "")
    assert len(fake_os.spawned) == 1 and "r1" not in host.crashes
    # Closed: a queued run is not started while the disk is full.
    enqueue(host.store, "r2")
    host.loop_once()
    assert len(fake_os.spawned) == 1 and host.disk.full
    assert host.next_timeout() <= LAST_PROBE_S
    # Probes back off while nothing fits ...
    mono.advance(0.5)
    host.loop_once()
    assert space.probes == 1 and host.disk.full
    mono.advance(0.5)
    host.loop_once()
    assert space.probes == 1  # the next is due a second after the first
    # ... and once one fits, the parked run and the queued one both go on.
    space.free = True
    fake_os.exit_code = None
    mono.advance(LAST_PROBE_S)
    host.loop_once()
    assert not host.disk.full
    assert {h.run_id for h in fake_os.spawned[1:]} == {"r1", "r2"}
    row = host.store.get("r1")
    assert row is not None and row.error_code is None


def test_a_launch_out_of_space_goes_back_to_the_queue_and_waits(rig: Rig) -> None:
    host, fake_os, mono, space = rig
    fake_os.exit_code = WorkerExit.DISK_FULL  # no bundle yet: its first write failed
    enqueue(host.store, "r1")
    space.free = False
    for _ in range(10):
        host.loop_once()
    row = host.store.get("r1")
    assert row is not None and row.state == "queued" and row.error_code is None
    assert len(fake_os.spawned) == 1 and "r1" not in host.crashes
    space.free = True
    fake_os.exit_code = None
    mono.advance(LAST_PROBE_S)
    host.loop_once()
    assert [h.run_id for h in fake_os.spawned] == ["r1", "r1"]


def test_runs_an_earlier_host_parked_disk_full_are_freed_at_start_up(tmp_path: Path) -> None:
    settings = load_settings(lease_ms=10_000, renew_ms=2_000)
    paths = resolve_paths(settings, tmp_path)
    first = Host(paths, settings, concurrency=1, clock=FakeClock(), monotonic=FakeClock(1.0),
                 os_layer=FakeOs(), use_zygote=False)
    enqueue(first.store, "r1")
    claim = first.store.claim_next("someone")
    assert claim is not None
    first.store.mark_running("r1", claim.token)
    first.store.park("r1", claim.token, code="disk_full", message="full")
    first.store.close()
    host = Host(paths, settings, concurrency=1, clock=FakeClock(), monotonic=FakeClock(1.0),
                os_layer=FakeOs(), use_zygote=False)
    host.start()
    try:
        row = host.store.get("r1")
        assert row is not None and row.state == "parked" and row.error_code is None
    finally:
        host.shutdown()


def test_the_probe_writes_and_removes_a_private_file(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    assert probe_space(runs) and runs.is_dir() and list(runs.iterdir()) == []
    assert runs.stat().st_mode & 0o777 == 0o700
    gate = DiskGate(runs, FakeClock(5.0), probe=lambda _: False)
    assert not gate.reopened()  # open: nothing to probe
    gate.trip("full")
    assert gate.full and gate.timeout(60) == pytest.approx(0.5)
