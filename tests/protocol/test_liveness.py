"""Proving a process alive from /proc gives psutil's answers, start times included."""

from __future__ import annotations

import os
import subprocess
import sys

import psutil
import pytest
from pi_workflows.protocol import liveness

from tests.helpers.processes import reap
from tests.helpers.waiting import wait_for

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def _psutil_same(pid: int, start: float) -> bool:
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        return abs(proc.create_time() - start) <= 0.05
    except psutil.NoSuchProcess:
        return False


def test_the_start_time_is_psutils_to_the_bit() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        for pid in (os.getpid(), child.pid, 1):
            seen = liveness._proc_stat(pid)
            assert isinstance(seen, tuple), pid
            assert seen[1] == psutil.Process(pid).create_time(), pid
            # What processes.json records (a worker's own, off psutil) is the same number.
            assert liveness.process_start_time(pid) == psutil.Process(pid).create_time(), pid
        assert liveness.process_start_time() == psutil.Process().create_time()
    finally:
        reap(child)


def test_alive_zombie_dead_and_reused_agree_with_psutil() -> None:
    me = psutil.Process().create_time()
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    wait_for(lambda: psutil.Process(child.pid).status() == psutil.STATUS_ZOMBIE, 30,
             what="the child to exit (a zombie: exited, not reaped)", interval=0.01)
    zombie_start = psutil.Process(child.pid).create_time()
    cases = [(os.getpid(), me), (os.getpid(), me + 1.0), (os.getpid(), me - 0.04),
             (child.pid, zombie_start)]
    for pid, start in cases:
        assert liveness.is_same_process(pid, start) == _psutil_same(pid, start), (pid, start)
    assert liveness.is_same_process(os.getpid(), me)
    assert not liveness.is_same_process(os.getpid(), me + 1.0)
    assert not liveness.is_same_process(child.pid, zombie_start)
    child.wait()
    assert liveness._proc_stat(child.pid) == liveness._GONE or psutil.pid_exists(child.pid)
    assert liveness.is_same_process(child.pid, zombie_start) == _psutil_same(child.pid,
                                                                             zombie_start)
    assert liveness._proc_stat(0) is None  # psutil decides pid 0
