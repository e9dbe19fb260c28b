"""A drain's SIGTERM reaches the worker alone, never the rest of its process group.

A command a worker starts stays in the worker's group from its fork until
its own ``setsid``; a SIGTERM sent to the group in that window killed it
before it ran, and the run's node failed during a graceful drain (found by
a 200-iteration drill). Real processes: a stand-in worker leads its group
and keeps a child in it, as such a command is for that moment; the child
must outlive ``terminate``, while ``kill`` still takes the whole group.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from pi_workflows.protocol.spawn import PIPE, Popen, spawn
from pi_workflows.protocol.states import QueueState
from pi_workflows.protocol.store import Claim
from pi_workflows.supervisor.procs.workers import Child, WorkerHandle
from pi_workflows.supervisor.procs.zygote import ForkedChild

from tests.helpers.processes import alive
from tests.helpers.waiting import poll

# Leads its own group (spawn gives it a session), keeps a child in that group, waits.
WORKER = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
print(child.pid, flush=True)
time.sleep(60)
"""


@pytest.fixture
def worker() -> Iterator[tuple[Popen[bytes], int]]:
    """(the stand-in worker, the pid of the child it keeps in its group)."""
    proc = spawn([sys.executable, "-c", WORKER], stdout=PIPE)
    assert proc.stdout is not None
    child = int(proc.stdout.readline())
    assert os.getpgid(child) == proc.pid  # in the worker's group, as a command before setsid
    yield proc, child
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _handle(proc: Any) -> WorkerHandle:
    state = QueueState.RUNNING
    return WorkerHandle(Claim("20261201T000000Z-x-0123abcd", "host-r", "tok", 0, state, state),
                        proc, 0.0)


class _NoZygote:
    """A zygote that reports nothing (only ``poll`` would ask it)."""

    def __init__(self) -> None:
        self.exits: dict[int, int] = {}
        self.closed = True

    def pump(self) -> None:
        pass


@pytest.mark.timeout(30)
def test_terminate_signals_the_worker_and_not_its_group(
        worker: tuple[Popen[bytes], int]) -> None:
    proc, child = worker
    handle = _handle(Child(proc))
    handle.terminate(0.0)
    assert proc.wait(10) == -signal.SIGTERM
    assert alive(child)  # the group was not signalled
    handle.kill(1.0)  # the whole group
    poll(lambda: not alive(child), 10, interval=0.01)
    assert not alive(child)


@pytest.mark.timeout(30)
def test_a_forked_worker_is_signalled_through_its_pidfd_alone(
        worker: tuple[Popen[bytes], int]) -> None:
    proc, child = worker
    forked = ForkedChild(_NoZygote(), proc.pid, os.pidfd_open(proc.pid))  # type: ignore[arg-type]
    handle = _handle(forked)
    handle.terminate(0.0)
    assert proc.wait(10) == -signal.SIGTERM
    assert alive(child)
    assert forked.send(signal.SIGTERM) is False  # gone: no error, and nobody else hit
