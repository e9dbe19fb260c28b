"""Worker subprocesses: starting them, and the one handle a runner keeps per worker.

Owns starting cold workers with the command line and environment that
``protocol.wire`` defines (``supervisor.procs.zygote`` forks the others), and
``WorkerHandle``: the
per-child handle a runner reaps with (``poll``: never a catch-all
``waitpid(-1)``) whose ``phase`` is changed only through ``change``, which
checks the edge against one table (as supervisord does for its processes).
Imports ``protocol``; never the worker package.
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Protocol

from ...protocol.spawn import Popen, signal_group, spawn
from ...protocol.store import Claim
from ...protocol.wire import marker_value, worker_argv, worker_env


class Phase(StrEnum):
    """Where a worker is in its life, as its runner sees it."""

    STARTING = "starting"  # spawned; its run is not yet ``running`` in the queue
    RUNNING = "running"  # owns its run
    LINGERING = "lingering"  # settled or parked its run, and has not exited yet
    STOPPING = "stopping"  # asked to park (SIGTERM); killed if it outstays its grace
    KILLED = "killed"  # SIGKILLed (a hung or lapsed worker); waiting to be reaped
    RETIRING = "retiring"  # superseded by a new worker for its run; killed, to be reaped
    EXITED = "exited"  # reaped


P = Phase
_LIVE_EXITS = {P.STOPPING, P.KILLED, P.RETIRING, P.EXITED}
EDGES: dict[Phase, frozenset[Phase]] = {
    P.STARTING: frozenset({P.RUNNING, P.LINGERING} | _LIVE_EXITS),
    P.RUNNING: frozenset({P.LINGERING} | _LIVE_EXITS),
    P.LINGERING: frozenset(_LIVE_EXITS),
    P.STOPPING: frozenset({P.KILLED, P.RETIRING, P.EXITED}),
    P.KILLED: frozenset({P.RETIRING, P.EXITED}),
    P.RETIRING: frozenset({P.EXITED}),
    P.EXITED: frozenset(),
}


class PhaseError(RuntimeError):
    """A phase change the table does not allow: a bug in the runner, never input."""


class Proc(Protocol):
    """What a handle needs of its process (a real child, or a test's fake)."""

    @property
    def pid(self) -> int: ...
    def poll(self) -> int | None: ...
    def wait(self, timeout: float | None = None) -> int: ...
    def send(self, sig: int) -> bool: ...
    def send_group(self, sig: int) -> bool: ...


class Child:
    """A real worker process: the leader of its own process group."""

    def __init__(self, popen: Popen[bytes]) -> None:
        self.popen = popen

    @property
    def pid(self) -> int:
        return self.popen.pid

    def poll(self) -> int | None:
        return self.popen.poll()

    def wait(self, timeout: float | None = None) -> int:
        return self.popen.wait(timeout)

    def send(self, sig: int) -> bool:
        """Signal the worker alone; False once it has exited."""
        if self.popen.poll() is not None:
            return False
        self.popen.send_signal(sig)
        return True

    def send_group(self, sig: int) -> bool:
        return signal_group(self.popen, sig)


@dataclass
class WorkerHandle:
    claim: Claim
    proc: Proc
    since: float  # monotonic time of the last phase change
    phase: Phase = Phase.STARTING
    # Hung detection runs on the host's monotonic clock, never on the
    # worker-written wall-clock lease (an NTP step or VM resume moves that):
    # the lease value last seen in the row, and when it was first seen.
    lease_seen: int | None = field(init=False)
    lease_seen_at: float = field(init=False)

    def __post_init__(self) -> None:
        self.lease_seen, self.lease_seen_at = self.claim.lease_expires_at, self.since

    @property
    def run_id(self) -> str:
        return self.claim.run_id

    @property
    def pid(self) -> int:
        return self.proc.pid

    def poll(self) -> int | None:
        return self.proc.poll()

    def stalled_for(self, lease: int | None, now: float) -> float:
        """Monotonic seconds since the row's lease last changed (a renewal).

        Any change counts, forward or back: a renewal after a backward step
        writes a smaller value, and is progress all the same.
        """
        if lease != self.lease_seen:
            self.lease_seen, self.lease_seen_at = lease, now
        return now - self.lease_seen_at

    def change(self, to: Phase, now: float) -> None:
        """The one way a phase changes; ``now`` starts the new phase's clock."""
        if to not in EDGES[self.phase]:
            raise PhaseError(f"worker {self.pid} of run {self.run_id}: {self.phase} -> {to}")
        self.phase, self.since = to, now

    def terminate(self, now: float) -> None:
        """Ask the worker to park and exit; a second request only resends the signal.

        To the worker alone, not its group: a command it is starting is in
        that group from its fork until its own ``setsid``, and a SIGTERM
        there kills it before it runs (a drain would fail the run's node).
        The worker stops its own children as it parks.
        """
        self.proc.send(signal.SIGTERM)
        if self.phase not in (P.STOPPING, P.KILLED, P.RETIRING, P.EXITED):
            self.change(P.STOPPING, now)

    def kill(self, now: float, *, retire: bool = False) -> None:
        self.proc.send_group(signal.SIGKILL)
        target = P.RETIRING if retire else P.KILLED
        if self.phase != target and target in EDGES[self.phase]:
            self.change(target, now)


def spawn_worker(claim: Claim, *, project: Path, project_key: str, runner_id: str,
                 config_json: str = "", now: float) -> WorkerHandle:
    argv = worker_argv(project, runner_id, os.getpid(), run_id=claim.run_id,
                       claim_state=claim.state)
    env = worker_env(marker_value(project_key, runner_id, claim.run_id),
                     config_json=config_json, token=claim.token)
    # The project is the worker's working directory: relative paths in shell
    # nodes resolve against it.
    return WorkerHandle(claim, Child(spawn(argv, cwd=project, env=env)), now)
