"""A fake OS layer for driving ``Host`` one ``loop_once`` at a time, without processes.

Owns ``FakeProc`` (a worker process whose exit code the test sets),
``FakeOs`` (the ``OsLayer`` seam: what the host spawned and killed, what
its process scans report) and ``enqueue`` (a detached run for the host to
claim). Imports ``pi_workflows`` only: never pytest, a conftest or a test
module.
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

from pi_workflows.protocol.store import Claim, RunSource, Store
from pi_workflows.protocol.wire import WorkerExit
from pi_workflows.supervisor.procs.lockholders import Holder
from pi_workflows.supervisor.procs.workers import WorkerHandle


class FakeProc:
    """Stands in for a worker process: exits with ``code`` when the test says so."""

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

    def send(self, sig: int) -> bool:
        self.signals.append(sig)
        return True

    def send_group(self, sig: int) -> bool:
        self.signals.append(sig)
        if sig == signal.SIGKILL and self.code is None:
            self.code = -9
        return True


class FakeOs:
    """What the host spawned and killed, and how each fake worker will end."""

    def __init__(self) -> None:
        self.exit_code: int | None = WorkerExit.CRASHED
        self.spawned: list[WorkerHandle] = []
        self.kills: list[list[Any]] = []
        self.leftovers: list[Any] = []  # what run_processes reports
        self.stale: list[Any] = []  # what stale_writers reports
        self.holders: list[Holder] = []  # what lock_holders reports
        self.spawn_error: OSError | None = None  # what spawn_worker raises, if anything
        self.sweeps = 0  # sweep_tempdirs calls

    def spawn_worker(self, claim: Claim, *, now: float, **_: object) -> WorkerHandle:
        if self.spawn_error is not None:
            raise self.spawn_error
        handle = WorkerHandle(claim, FakeProc(self.exit_code), now)
        self.spawned.append(handle)
        return handle

    def start_zygote(self, **_: object) -> Any:
        raise AssertionError("the zygote is off in these tests")

    def run_processes(self, project_key: str, runner_id: str,
                      run_id: str | None = None) -> list[Any]:
        return list(self.leftovers)

    def orphans(self, runs_dir: Path, project_key: str, live: set[str]) -> list[Any]:
        return []

    def stale_writers(self, runs_dir: Path, project_key: str, run_id: str,
                      owner: str) -> list[Any]:
        return list(self.stale)

    def lock_holders(self, bundle_dir: Path) -> list[Holder]:
        return list(self.holders)

    def kill(self, procs: list[Any]) -> int:
        self.kills.append(list(procs))
        return len(procs)

    def sweep_tempdirs(self) -> int:
        self.sweeps += 1
        return 0


def enqueue(store: Store, run_id: str) -> None:
    store.enqueue_detached(run_id, RunSource("w", "/w.workflow.py", "ab" * 32, "sha256:x"), {})
