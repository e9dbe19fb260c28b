"""The host's supervisor pass, driven one ``loop_once`` at a time over fake workers.

Workers are replaced by handles whose exit codes the test sets (the fake OS
layer); the store, the lock and the clock are real or injected. No threads,
no sleeps.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from pi_workflows.protocol.settings import load_settings, resolve_paths
from pi_workflows.protocol.store import Claim, RunSource, Store
from pi_workflows.protocol.wire import WorkerExit
from pi_workflows.supervisor import host as host_mod
from pi_workflows.supervisor.host import Host
from pi_workflows.supervisor.workers import WorkerHandle

from ..conftest import FakeClock


class FakeProc:
    """Stands in for a worker's Popen: exits with ``code`` when the test says so."""

    next_pid = 4_000_000

    def __init__(self, code: int | None) -> None:
        FakeProc.next_pid += 1
        self.pid = FakeProc.next_pid
        self.code = code
        self.signals: list[int] = []

    def poll(self) -> int | None:
        return self.code

    def wait(self, timeout: float | None = None) -> int:
        return self.code if self.code is not None else -9


class Workers:
    """What the host spawned, and how each fake worker will end."""

    def __init__(self) -> None:
        self.exit_code: int | None = WorkerExit.CRASHED
        self.spawned: list[WorkerHandle] = []

    def spawn(self, claim: Claim, **_: object) -> WorkerHandle:
        handle = WorkerHandle(claim, FakeProc(self.exit_code))  # type: ignore[arg-type]
        self.spawned.append(handle)
        return handle


@pytest.fixture
def rig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Host, Workers]]:
    workers = Workers()
    monkeypatch.setattr(host_mod, "spawn_worker", workers.spawn)
    monkeypatch.setattr(WorkerHandle, "signal",
                        lambda self, sig: self.proc.signals.append(sig) or True)
    settings = load_settings(restart_backoff_s=0, crash_limit=3, lease_ms=10_000)
    host = Host(resolve_paths(settings, tmp_path), settings, concurrency=2,
                clock=FakeClock(), use_standby=False)
    host.start()
    yield host, workers
    host.shutdown()


def _enqueue(store: Store, run_id: str) -> None:
    store.enqueue_detached(run_id, RunSource("w", "/w.workflow.py", "ab" * 32, "sha256:x"), {})


def test_a_crashing_worker_is_restarted_then_the_run_fails_past_the_budget(
        rig: tuple[Host, Workers]) -> None:
    host, workers = rig
    _enqueue(host.store, "r1")
    for _ in range(6):
        host.loop_once()
    row = host.store.get("r1")
    assert row is not None and row.state == "failed" and row.error_code == "worker_crash_loop"
    assert len(workers.spawned) == 3  # the first start and two restarts
    assert not host.workers and not host.pending


def test_a_clean_exit_that_left_the_claim_is_a_crash(rig: tuple[Host, Workers]) -> None:
    host, workers = rig
    workers.exit_code = WorkerExit.FINISHED  # but nothing settled the row
    _enqueue(host.store, "r1")
    for _ in range(6):
        host.loop_once()
    row = host.store.get("r1")
    assert row is not None and row.error_code == "worker_crash_loop"


def test_a_boot_error_fails_the_run_without_a_restart(rig: tuple[Host, Workers]) -> None:
    host, workers = rig
    workers.exit_code = WorkerExit.BOOT_ERROR
    _enqueue(host.store, "r1")
    host.loop_once()
    host.loop_once()
    row = host.store.get("r1")
    assert row is not None and row.state == "failed" and row.error_code == "worker_boot_error"
    assert len(workers.spawned) == 1


def test_a_hung_worker_is_killed_and_its_run_claimed_again(rig: tuple[Host, Workers]) -> None:
    host, workers = rig
    workers.exit_code = None  # runs forever and never renews
    _enqueue(host.store, "r1")
    host.loop_once()
    first = host.workers["r1"]
    assert host.store.get("r1").claim_token == first.claim.token  # type: ignore[union-attr]
    host.clock.advance(host.settings.lease_ms + 1)  # type: ignore[attr-defined]
    host.loop_once()
    assert signal.SIGKILL in first.proc.signals  # type: ignore[attr-defined]
    second = host.workers["r1"]
    assert second is not first and first in host.retiring
    row = host.store.get("r1")
    assert row is not None and row.claim_token == second.claim.token != first.claim.token


def test_concurrency_is_a_ceiling(rig: tuple[Host, Workers]) -> None:
    host, workers = rig
    workers.exit_code = None
    for i in range(5):
        _enqueue(host.store, f"r{i}")
    host.loop_once()
    host.loop_once()
    assert len(host.workers) == 2 and len(workers.spawned) == 2
    assert [r.state for r in host.store.list_runs()].count("queued") == 3
