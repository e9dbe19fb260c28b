"""The host's supervisor pass, driven one ``loop_once`` at a time over a fake OS.

Workers are fake processes whose exit codes the test sets; time (both the
lease clock and the monotonic clock) moves only when the test says so; the
store and the lock are real. No threads, no sleeps, no real processes.
"""

from __future__ import annotations

import errno
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from loguru import logger
from pi_workflows.protocol.fence import bundle_lock
from pi_workflows.protocol.liveness import host_name, process_start_time
from pi_workflows.protocol.settings import load_settings, resolve_paths
from pi_workflows.protocol.store import Claim
from pi_workflows.protocol.wire import WorkerExit
from pi_workflows.supervisor.host.loop import SPAWN_RETRY_S, Host
from pi_workflows.supervisor.procs.lockholders import Holder
from pi_workflows.supervisor.procs.workers import EDGES, Phase, PhaseError, WorkerHandle

from tests.helpers.clocks import FakeClock
from tests.helpers.fake_os import FakeOs, FakeProc, enqueue

Rig = tuple[Host, FakeOs, FakeClock[float]]


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    fake_os, mono = FakeOs(), FakeClock(1000.0)
    settings = load_settings(restart_backoff_s=0, crash_limit=3, crash_window_s=60,
                             lease_ms=10_000, renew_ms=2_000, drain_grace_s=10,
                             hung_kill_after_s=5)
    host = Host(resolve_paths(settings, tmp_path), settings, concurrency=2, clock=FakeClock(),
                monotonic=mono, os_layer=fake_os, use_zygote=False)
    host.start()
    yield host, fake_os, mono
    host.shutdown()


def _one_live_worker(host: Host, fake_os: FakeOs) -> WorkerHandle:
    """Run r1 in a fake worker that does not exit until the test says so."""
    fake_os.exit_code = None
    enqueue(host.store, "r1")
    host.loop_once()
    return host.workers["r1"]


def _proc(handle: WorkerHandle) -> FakeProc:
    assert isinstance(handle.proc, FakeProc)
    return handle.proc


def test_a_crashing_worker_is_restarted_then_the_run_fails_past_the_budget(rig: Rig) -> None:
    host, fake_os, _ = rig
    fake_os.leftovers = ["shell-child"]
    enqueue(host.store, "r1")
    for _ in range(6):
        host.loop_once()
    row = host.store.get("r1")
    assert row is not None and row.state == "failed" and row.error_code == "worker_crash_loop"
    assert len(fake_os.spawned) == 3  # the first start and two restarts
    assert not host.workers and not host.pending
    # Each crash had the run's leftover processes killed before anything reran.
    assert fake_os.kills.count(["shell-child"]) == 3
    assert all(h.phase == Phase.EXITED for h in fake_os.spawned)


def test_crashes_outside_the_window_do_not_count(rig: Rig) -> None:
    host, fake_os, mono = rig
    enqueue(host.store, "r1")
    for _ in range(12):
        host.loop_once()
        mono.advance(61)  # each crash falls out of the 60 s window before the next
        host.clock.advance(1)  # type: ignore[attr-defined]
    row = host.store.get("r1")
    assert row is not None and row.state != "failed", row
    assert len(fake_os.spawned) >= 4 and host.crashes.count("r1") == 1


def test_restart_backoff_doubles_on_the_monotonic_clock(tmp_path: Path) -> None:
    fake_os, mono = FakeOs(), FakeClock(1000.0)
    settings = load_settings(restart_backoff_s=2, crash_limit=5, lease_ms=60_000)
    host = Host(resolve_paths(settings, tmp_path), settings, concurrency=1, clock=FakeClock(),
                monotonic=mono, os_layer=fake_os, use_zygote=False)
    host.start()
    try:
        enqueue(host.store, "r1")
        host.loop_once()  # start
        host.loop_once()  # reap crash 1: restart due in 2 s
        assert host.pending["r1"].due == mono.now + 2
        host.loop_once()
        assert len(fake_os.spawned) == 1  # not yet
        mono.advance(2)
        host.loop_once()  # restart
        host.loop_once()  # reap crash 2: due in 4 s
        assert len(fake_os.spawned) == 2 and host.pending["r1"].due == mono.now + 4
    finally:
        host.shutdown()


def test_a_clean_exit_that_left_the_claim_is_a_crash(rig: Rig) -> None:
    host, fake_os, _ = rig
    fake_os.exit_code = WorkerExit.FINISHED  # but nothing settled the row
    enqueue(host.store, "r1")
    for _ in range(6):
        host.loop_once()
    row = host.store.get("r1")
    assert row is not None and row.error_code == "worker_crash_loop"


def test_a_boot_error_fails_the_run_without_a_restart(rig: Rig) -> None:
    host, fake_os, _ = rig
    fake_os.exit_code = WorkerExit.BOOT_ERROR
    enqueue(host.store, "r1")
    host.loop_once()
    host.loop_once()
    row = host.store.get("r1")
    assert row is not None and row.state == "failed" and row.error_code == "worker_boot_error"
    assert len(fake_os.spawned) == 1


def test_a_hung_worker_is_killed_and_its_run_claimed_again(rig: Rig) -> None:
    host, fake_os, mono = rig
    fake_os.exit_code = None  # runs forever and never renews
    enqueue(host.store, "r1")
    host.loop_once()
    first = host.workers["r1"]
    _proc(first).code = None
    assert host.store.get("r1").claim_token == first.claim.token  # type: ignore[union-attr]
    host.clock.advance(host.settings.lease_ms + 1)  # type: ignore[attr-defined]
    mono.advance(host.settings.lease_ms / 1000)  # a lease of the host's own time
    _proc(first).send_group = lambda sig: _proc(first).signals.append(sig) or True  # type: ignore[method-assign]
    host.loop_once()
    assert signal.SIGKILL in _proc(first).signals
    second = host.workers["r1"]
    assert second is not first and first in host.retiring and first.phase == Phase.RETIRING
    row = host.store.get("r1")
    assert row is not None and row.claim_token == second.claim.token != first.claim.token
    _proc(first).code = -9
    host.loop_once()
    assert first not in host.retiring and first.phase == Phase.EXITED


def test_a_worker_that_keeps_hanging_ends_as_a_crash_loop(rig: Rig) -> None:
    host, fake_os, mono = rig
    fake_os.exit_code = None  # every worker runs forever and never renews
    enqueue(host.store, "r1")
    host.loop_once()
    for _ in range(3):
        host.clock.advance(host.settings.lease_ms + 1)  # type: ignore[attr-defined]
        mono.advance(host.settings.lease_ms / 1000)
        host.loop_once()
    row = host.store.get("r1")
    assert row is not None and (row.state, row.error_code) == ("failed", "worker_crash_loop")
    assert len(fake_os.spawned) == 3  # the first and two replacements, then no more
    assert "r1" not in host.workers


def test_a_locked_bundle_kills_the_stale_holder_without_spending_the_crash_budget(
        rig: Rig) -> None:
    host, fake_os, _ = rig
    fake_os.exit_code = WorkerExit.BUNDLE_LOCKED
    fake_os.stale = ["frozen-old-worker"]
    enqueue(host.store, "r1")
    for _ in range(8):
        host.loop_once()
    assert fake_os.kills.count(["frozen-old-worker"]) >= 5  # killed at each locked exit
    row = host.store.get("r1")
    assert row is not None and row.state != "failed"  # never a crash loop
    assert "r1" not in host.crashes
    fake_os.stale = []  # nobody to blame and no bundle: a crash like any other
    for _ in range(6):
        host.loop_once()
    row = host.store.get("r1")
    assert row is not None and row.error_code == "worker_crash_loop"


def _bundle_of(host: Host, run_id: str) -> Path:
    bundle = host.paths.runs_dir / run_id
    bundle.mkdir(parents=True)
    (bundle / "state.json").write_text('{"status": "running"}')
    return bundle


def test_a_bundle_locked_by_a_stranger_parks_the_run_blocked_not_a_crash(rig: Rig) -> None:
    host, fake_os, _ = rig
    fake_os.exit_code = WorkerExit.BUNDLE_LOCKED
    fake_os.holders = [Holder(4242, "flock")]
    enqueue(host.store, "r1")
    _bundle_of(host, "r1")
    for _ in range(4):
        host.loop_once()
    row = host.store.get("r1")
    assert row is not None and row.state == "parked" and row.error_code == "bundle_locked"
    assert "pid 4242 (flock)" in (row.error_message or "")
    assert "resume r1" in (row.error_message or "")
    assert len(fake_os.spawned) == 1 and not any(fake_os.kills)  # waits for a person
    assert "r1" not in host.crashes


def test_a_locked_bundle_with_no_holder_found_is_retried_as_a_crash(rig: Rig) -> None:
    host, fake_os, _ = rig
    fake_os.exit_code = WorkerExit.BUNDLE_LOCKED
    enqueue(host.store, "r1")
    _bundle_of(host, "r1")
    host.loop_once()
    host.loop_once()
    row = host.store.get("r1")
    assert row is not None and row.error_code != "bundle_locked"  # not parked for good
    assert len(fake_os.spawned) == 2 and host.crashes.record("r1") == 2


def test_a_crash_loop_whose_bundle_stays_locked_parks_instead_of_failing(rig: Rig) -> None:
    host, _, _ = rig
    enqueue(host.store, "r1")
    lock = bundle_lock(_bundle_of(host, "r1"), timeout=1)
    lock.acquire()  # the bundle cannot record a failure
    try:
        for _ in range(6):
            host.loop_once()
    finally:
        lock.release()
    row = host.store.get("r1")
    # Never failed in the queue while the bundle says running: both unsettled.
    assert row is not None and row.state == "parked"
    assert row.error_code == "worker_crash_loop" and "resume r1" in (row.error_message or "")


def test_concurrency_is_a_ceiling(rig: Rig) -> None:
    host, fake_os, _ = rig
    fake_os.exit_code = None
    for i in range(5):
        enqueue(host.store, f"r{i}")
    host.loop_once()
    host.loop_once()
    assert len(host.workers) == 2 and len(fake_os.spawned) == 2
    assert [r.state for r in host.store.list_runs()].count("queued") == 3


def test_a_drain_waits_its_grace_then_kills(rig: Rig) -> None:
    host, fake_os, mono = rig
    worker = _one_live_worker(host, fake_os)
    host.request_stop()
    assert worker.phase == Phase.STOPPING and _proc(worker).signals == [signal.SIGTERM]
    # The fake ignores SIGKILL only in this test, to see the phase held.
    _proc(worker).send_group = lambda sig: _proc(worker).signals.append(sig) or True  # type: ignore[method-assign]
    mono.advance(14.9)
    host.loop_once()
    # Inside the 10 s drain grace plus the margin the worker gets to record and park.
    assert signal.SIGKILL not in _proc(worker).signals
    mono.advance(0.2)
    host.loop_once()
    assert _proc(worker).signals[-1] == signal.SIGKILL and worker.phase == Phase.KILLED
    assert not fake_os.spawned[1:]  # nothing new is started while draining


def test_a_worker_that_lingers_after_releasing_its_run_is_stopped(rig: Rig) -> None:
    host, fake_os, mono = rig
    worker = _one_live_worker(host, fake_os)
    host.store.mark_running("r1", worker.claim.token)
    host.store.finish("r1", worker.claim.token)  # the worker settled its run itself
    host.loop_once()
    assert worker.phase == Phase.LINGERING and not _proc(worker).signals
    mono.advance(4.9)
    host.loop_once()
    assert not _proc(worker).signals  # still inside hung_kill_after_s
    mono.advance(0.2)
    host.loop_once()
    assert worker.phase == Phase.STOPPING and _proc(worker).signals == [signal.SIGTERM]


def test_a_worker_becomes_running_once_its_run_is_running(rig: Rig) -> None:
    host, fake_os, _ = rig
    worker = _one_live_worker(host, fake_os)
    assert worker.phase == Phase.STARTING
    host.store.mark_running("r1", worker.claim.token)
    host.loop_once()
    assert worker.phase == Phase.RUNNING


def test_phase_edges_are_checked() -> None:
    claim = Claim("r1", "h", "t", 0, "starting", "queued")  # type: ignore[arg-type]
    handle = WorkerHandle(claim, FakeProc(None), 0.0)
    handle.change(Phase.EXITED, 1.0)
    with pytest.raises(PhaseError):
        handle.change(Phase.RUNNING, 2.0)  # nothing comes back from exited
    assert EDGES[Phase.EXITED] == frozenset()
    assert all(Phase.EXITED in EDGES[p] for p in Phase if p != Phase.EXITED)
    assert Phase.STARTING not in set().union(*EDGES.values())


# ---- wall-clock steps: hung detection runs on the host's monotonic clock ----

HOUR_MS = 3_600_000


def _wall(host: Host) -> FakeClock[int]:
    assert isinstance(host.clock, FakeClock)
    return host.clock  # the store's and the host's wall clock


def _renewing_passes(host: Host, mono: FakeClock[float], worker: WorkerHandle,
                     seconds: int) -> None:
    """The worker renews every renew_ms (2 s) while the host passes once a second."""
    for tick in range(seconds):
        mono.advance(1.0)
        _wall(host).advance(1_000)
        if tick % 2:
            host.store.renew("r1", worker.claim.token)
        host.loop_once()


def test_a_renewing_worker_survives_a_backward_wall_clock_step(rig: Rig) -> None:
    host, fake_os, mono = rig
    worker = _one_live_worker(host, fake_os)
    _renewing_passes(host, mono, worker, 12)
    _wall(host).advance(-HOUR_MS)  # NTP steps the clock back an hour
    _renewing_passes(host, mono, worker, 35)  # three and a half leases
    assert host.workers["r1"] is worker and signal.SIGKILL not in _proc(worker).signals
    row = host.store.get("r1")
    assert row is not None and row.claim_token == worker.claim.token


def test_a_renewing_worker_is_not_killed_by_a_forward_wall_clock_step(rig: Rig) -> None:
    host, fake_os, mono = rig
    worker = _one_live_worker(host, fake_os)
    _renewing_passes(host, mono, worker, 12)
    _wall(host).advance(HOUR_MS)  # a VM resumes an hour later
    # Its renewals go on (the store fences by token, not by the wall clock), and
    # the host neither kills it as hung nor takes its run back, for leases on end.
    _renewing_passes(host, mono, worker, 35)
    assert host.workers["r1"] is worker and signal.SIGKILL not in _proc(worker).signals
    row = host.store.get("r1")
    assert row is not None and row.claim_token == worker.claim.token


def _other_runners_claim(host: Host) -> str:
    """r2, claimed by a live terminal session (registered as this very process)."""
    host.store.register_runner("session-t", "session", os.getpid(), process_start_time(),
                               host_name())
    enqueue(host.store, "r2")
    return host.store.claim_by_id("r2", "session-t").token


@pytest.mark.parametrize("step_ms", [-HOUR_MS, HOUR_MS], ids=["back", "forward"])
def test_another_runners_claim_is_taken_only_after_a_lease_without_renewals(
        rig: Rig, step_ms: int) -> None:
    host, fake_os, mono = rig
    fake_os.exit_code = None
    token = _other_runners_claim(host)
    for tick in range(12):  # the session's worker renews every two seconds
        mono.advance(1.0)
        _wall(host).advance(1_000 + (step_ms if tick == 5 else 0))
        if tick % 2:
            host.store.renew("r2", token)
        host.loop_once()
        assert "r2" not in host.workers  # live, whatever the wall clock did
    mono.advance(host.settings.lease_ms / 1000 - 0.5)  # then it stalls (SIGSTOP)
    host.loop_once()
    assert "r2" not in host.workers
    mono.advance(0.5)  # a whole lease of the host's time since its last renewal
    host.loop_once()
    row = host.store.get("r2")
    assert "r2" in host.workers and row is not None and row.runner_id == host.runner_id


@pytest.mark.parametrize("step_ms", [0, -HOUR_MS, HOUR_MS], ids=["frozen", "back", "forward"])
def test_a_worker_that_stops_renewing_is_killed_after_a_lease_of_monotonic_time(
        rig: Rig, step_ms: int) -> None:
    host, fake_os, mono = rig
    worker = _one_live_worker(host, fake_os)
    _renewing_passes(host, mono, worker, 6)
    _wall(host).advance(step_ms)  # the wall clock steps (or stands still) from here on
    mono.advance(9.9)  # just short of a lease with no renewal
    host.loop_once()
    assert host.workers["r1"] is worker and not _proc(worker).signals
    mono.advance(0.2)
    host.loop_once()
    assert set(_proc(worker).signals) == {signal.SIGKILL}
    second = host.workers["r1"]  # claimed again at once, under a new token
    row = host.store.get("r1")
    assert second is not worker and row is not None
    assert row.claim_token == second.claim.token != worker.claim.token


# ---- spawn failures: said once per errno a minute --------------------------

def test_repeated_spawn_failures_are_logged_once_a_minute_with_the_held_count(
        rig: Rig) -> None:
    host, fake_os, mono = rig
    fake_os.spawn_error = OSError(errno.EMFILE, "Too many open files")
    lines: list[str] = []
    sink = logger.add(lines.append, format="{message}", level="WARNING")
    try:
        enqueue(host.store, "r1")
        for _ in range(30):  # a retry every SPAWN_RETRY_S for half a minute
            host.loop_once()
            mono.advance(SPAWN_RETRY_S)
        said = [line for line in lines if "could not start a worker" in line]
        assert len(said) == 1 and "Too many open files" in said[0]
        assert "more like it" not in said[0]
        mono.advance(31)  # past the minute: said again, with the count held back
        host.loop_once()
        said = [line for line in lines if "could not start a worker" in line]
        assert len(said) == 2 and "(29 more like it in the last minute)" in said[1]
    finally:
        logger.remove(sink)
    assert not fake_os.spawned and "r1" in host.pending


def test_a_host_with_every_slot_busy_still_watches_and_takes_a_stall_once_a_slot_frees(
        rig: Rig) -> None:
    host, fake_os, mono = rig
    fake_os.exit_code = None
    token = _other_runners_claim(host)  # r2: a terminal's run, renewing at first
    for run_id in ("r1", "r3"):  # both slots busy with live workers of ours
        enqueue(host.store, run_id)
    host.loop_once()
    assert set(host.workers) == {"r1", "r3"}
    host.store.renew("r2", token)
    host.loop_once()  # it sees that renewal, then none for a lease
    mono.advance(host.settings.lease_ms / 1000)
    host.loop_once()
    assert "r2" not in host.workers  # stalled, but no slot for it
    first = host.workers["r1"]
    host.store.mark_running("r1", first.claim.token)
    host.store.finish("r1", first.claim.token)
    _proc(first).code = WorkerExit.FINISHED
    host.loop_once()  # the slot frees: r2 is taken now, not a lease from now
    row = host.store.get("r2")
    assert "r2" in host.workers and row is not None and row.runner_id == host.runner_id
