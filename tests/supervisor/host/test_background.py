"""Finding and stopping the host from its lock file: a recycled pid is never signalled."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pi_workflows.protocol.liveness import process_start_time
from pi_workflows.protocol.paths import Paths
from pi_workflows.supervisor.host.background import (
    HostDidNotStart,
    HostDidNotStop,
    _reason,
    find_host,
    stop_host,
)

from tests.helpers.processes import reap

# Says when it is up, then waits; with "ignore" it shrugs SIGTERM off.
CHILD = ("import signal, sys, time\n"
         "if sys.argv[1:] == ['ignore']: signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
         "print('up', flush=True)\n"
         "time.sleep(60)\n")


@pytest.fixture
def paths(tmp_path: Path) -> Paths:
    return Paths(project=tmp_path, home=tmp_path, state_dir=tmp_path,
                 store_file=tmp_path / "store.sqlite3", runs_dir=tmp_path / "runs",
                 host_lock=tmp_path / "host.lock", log_dir=tmp_path / "logs")


Start = Callable[..., "subprocess.Popen[str]"]


@pytest.fixture
def child() -> Iterator[Start]:
    procs: list[subprocess.Popen[str]] = []

    def start(*args: str) -> subprocess.Popen[str]:
        proc = subprocess.Popen([sys.executable, "-c", CHILD, *args], stdout=subprocess.PIPE,
                                text=True)
        assert proc.stdout is not None and proc.stdout.readline() == "up\n"
        procs.append(proc)
        return proc

    yield start
    reap(*procs)


def _lock(paths: Paths, pid: int, start: float, *, ready: bool = True) -> None:
    paths.host_lock.write_text(json.dumps({"pid": pid, "pidStartTime": start,
                                           "runnerId": "host-x", "ready": ready}))


@pytest.mark.timeout(30)
def test_a_lock_naming_a_dead_or_recycled_pid_is_no_host_and_nothing_is_signalled(
        paths: Paths) -> None:
    assert find_host(paths) is None  # no lock file
    paths.host_lock.write_text("")  # released by its last holder
    assert find_host(paths) is None and stop_host(paths, timeout=1) is None
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait(10)
    _lock(paths, gone.pid, 1.0)
    assert find_host(paths) is None
    # A pid that is alive but another process now (another start time): our own.
    received: list[int] = []
    old = signal.signal(signal.SIGTERM, lambda sig, _: received.append(sig))
    try:
        _lock(paths, os.getpid(), process_start_time() - 3600)
        assert find_host(paths) is None
        assert stop_host(paths, timeout=1) is None
        paths.host_lock.write_text(json.dumps({"pid": os.getpid(), "ready": True}))
        assert find_host(paths) is None  # no start time: no proof
    finally:
        signal.signal(signal.SIGTERM, old)
    assert received == []


@pytest.mark.timeout(30)
def test_stop_signals_the_proven_holder_and_waits_for_it(paths: Paths, child: Start) -> None:
    proc = child()
    _lock(paths, proc.pid, process_start_time(proc.pid), ready=False)
    found = find_host(paths)
    assert found is not None and found.pid == proc.pid and found.ready is False
    stopped = stop_host(paths, timeout=10)
    assert stopped is not None and stopped.pid == proc.pid
    assert proc.wait(1) == -signal.SIGTERM  # it had exited when stop_host returned


@pytest.mark.timeout(30)
def test_a_host_that_does_not_exit_in_time_is_reported_not_killed(paths: Paths,
                                                                  child: Start) -> None:
    proc = child("ignore")
    _lock(paths, proc.pid, process_start_time(proc.pid))
    with pytest.raises(HostDidNotStop, match=f"kill -KILL {proc.pid}") as raised:
        stop_host(paths, timeout=0.2)
    assert raised.value.exit_code == 1
    assert proc.poll() is None  # still running: the user decides


def test_the_reason_is_the_hosts_error_line_else_its_last_words(tmp_path: Path) -> None:
    log = tmp_path / "host.log"
    log.write_text("pi-workflows: error: from an earlier start\n")
    offset = log.stat().st_size
    with log.open("a") as fh:
        fh.write("--- starting\nsome info\npi-workflows: error: the store is busy\n\n")
    assert _reason(log, offset, 6) == "the store is busy"
    log.write_text("Traceback (most recent call last):\nBoom: it broke\n")
    assert _reason(log, 0, 1) == "Boom: it broke (exit code 1)"
    log.write_text("")
    assert _reason(log, 0, -9) == "killed by signal 9"
    assert _reason(tmp_path / "missing.log", 0, 70) == "exit code 70"


def test_a_failed_start_exits_with_the_hosts_own_code() -> None:
    assert HostDidNotStart("x", exit_code=5).exit_code == 5  # incompatible store
    assert HostDidNotStart("x", exit_code=-9).exit_code == 1  # killed: no code of its own
    assert HostDidNotStart("x", exit_code=0).exit_code == 1
    assert HostDidNotStart("x").exit_code == 1
