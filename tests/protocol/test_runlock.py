"""The run lock itself: flock semantics the fence relies on, with real processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from pi_workflows.protocol.fence import LockTimeout, RunLock

from tests.helpers.processes import reap
from tests.helpers.waiting import poll

HOLDER = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(60)
"""


def _holder(path: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def _free_elsewhere(path: Path) -> bool:
    """Whether another process could take the lock right now."""
    probe = ("import fcntl, os, sys\nfd = os.open(sys.argv[1], os.O_RDWR)\n"
             "try:\n    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
             "except BlockingIOError:\n    sys.exit(1)\n")
    return subprocess.run([sys.executable, "-c", probe, str(path)], check=False).returncode == 0


@pytest.mark.timeout(30)
def test_a_process_killed_while_holding_it_frees_it(tmp_path: Path) -> None:
    path = tmp_path / "lock"
    holder = _holder(path)
    try:
        with pytest.raises(LockTimeout):
            RunLock(path, 0.2).acquire()
        holder.send_signal(signal.SIGKILL)
        holder.wait(10)
        lock = RunLock(path, 5)
        with lock:  # the kernel dropped the dead holder's lock
            assert not _free_elsewhere(path)
        assert _free_elsewhere(path)
    finally:
        reap(holder)


@pytest.mark.timeout(30)
def test_a_nested_write_keeps_it_held_until_the_outermost_release(tmp_path: Path) -> None:
    path = tmp_path / "lock"
    lock = RunLock(path, 1)
    with lock:
        with lock:
            pass
        assert not _free_elsewhere(path)  # the inner release must not unlock it
    assert _free_elsewhere(path)
    with pytest.raises(RuntimeError):
        lock.release()
    assert oct(path.stat().st_mode & 0o777) == "0o600"


@pytest.mark.timeout(30)
def test_two_threads_of_one_process_exclude_each_other(tmp_path: Path) -> None:
    lock = RunLock(tmp_path / "lock", 5)
    inside = threading.Event()
    leave = threading.Event()
    order: list[str] = []

    def first() -> None:
        with lock:
            order.append("first in")
            inside.set()
            leave.wait(10)
            order.append("first out")

    thread = threading.Thread(target=first)
    thread.start()
    assert inside.wait(10)
    lock.timeout = 0.1
    with pytest.raises(LockTimeout):
        lock.acquire()
    lock.timeout = 5
    leave.set()
    with lock:
        order.append("second in")
    thread.join(10)
    assert order == ["first in", "first out", "second in"]


@pytest.mark.timeout(30)
def test_a_lock_file_replaced_while_waiting_is_locked_afresh(tmp_path: Path) -> None:
    path = tmp_path / "lock"
    holder = _holder(path)
    try:
        result: list[BaseException | None] = []
        lock = RunLock(path, 10)
        held, done = threading.Event(), threading.Event()

        def take() -> None:
            try:
                with lock:
                    result.append(None)
                    held.set()
                    done.wait(10)
            except BaseException as exc:  # reported to the test thread
                result.append(exc)
                held.set()

        waiter = threading.Thread(target=take)
        waiter.start()
        # Replace the file the holder still locks: the waiter must lock the new one.
        (tmp_path / "fresh").write_text("")
        os.replace(tmp_path / "fresh", path)
        assert held.wait(10)
        assert result == [None]
        assert not _free_elsewhere(path)  # held: the file now at the path
        done.set()
        waiter.join(10)
        assert poll(lambda: _free_elsewhere(path), 5, 0.05)
    finally:
        reap(holder)
