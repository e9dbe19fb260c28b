"""The host's building blocks with real processes: lock, wakeup, orphan finding."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil
import pytest
from pi_workflows.protocol.liveness import process_start_time
from pi_workflows.protocol.processes import PROCESSES_SCHEMA
from pi_workflows.protocol.wakeup import poke
from pi_workflows.protocol.wire import MARKER_ENV, marker_value
from pi_workflows.supervisor.host.listener import Listener
from pi_workflows.supervisor.host.lock import HostLock, HostLockHeld
from pi_workflows.supervisor.procs.reaper import find_orphans, kill_processes

from tests.helpers.processes import reap
from tests.helpers.waiting import wait_for

HOLDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from pi_workflows.supervisor.host.lock import HostLock
    HostLock(Path(sys.argv[1])).acquire("runner-child")
    print("held", flush=True)
    time.sleep(60)
""")


def _sleeper(env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                            env={**os.environ, **(env or {})}, start_new_session=True)


def _wait_gone(proc: subprocess.Popen[bytes]) -> int:
    return proc.wait(10)


@pytest.mark.timeout(30)
def test_host_lock_is_exclusive_names_the_holder_and_dies_with_it(tmp_path: Path) -> None:
    path = tmp_path / "state" / "host.lock"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(HostLockHeld, match=f"pid {holder.pid}"):
            HostLock(path).acquire("me")
        assert json.loads(path.read_text())["runnerId"] == "runner-child"  # not wiped
        assert oct(path.stat().st_mode & 0o777) == oct(0o600)
        holder.send_signal(signal.SIGKILL)
        holder.wait(10)
        lock = HostLock(path)
        lock.acquire("me")  # the kernel released the dead holder's lock
        info = json.loads(path.read_text())
        assert info["pid"] == os.getpid() and info["ready"] is False
        lock.mark_ready()  # what scripts and tests wait for, instead of log wording
        info = json.loads(path.read_text())
        assert info["ready"] is True and info["runnerId"] == "me"
        lock.release()
    finally:
        reap(holder)


def test_wakeup_socket_delivers_pokes(tmp_path: Path) -> None:
    assert poke(tmp_path) is False  # nobody listens: dropped, not an error
    listener = Listener(tmp_path)
    try:
        assert poke(tmp_path) and poke(tmp_path)
        import select
        readable, _, _ = select.select([listener], [], [], 5)
        assert readable and listener.drain() == 2
        assert listener.drain() == 0
    finally:
        listener.close()


def _record(runs: Path, run_id: str, entries: list[dict[str, object]],
            status: str = "running") -> None:
    bundle = runs / run_id
    bundle.mkdir(parents=True)
    (bundle / "state.json").write_text(json.dumps({"status": status, "traceSeq": 0}))
    (bundle / "processes.json").write_text(json.dumps({"schema": PROCESSES_SCHEMA,
                                                       "processes": entries}))


@pytest.mark.timeout(60)
def test_orphans_are_found_by_record_and_marker_but_never_a_live_runners(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    key = "proj-123456789abc"
    recorded = _sleeper()
    marked_dead = _sleeper({MARKER_ENV: marker_value(key, "dead-runner", "r2")})
    marked_live = _sleeper({MARKER_ENV: marker_value(key, "live-runner", "r3")})
    other_project = _sleeper({MARKER_ENV: marker_value("other-000000000000", "dead-runner", "r4")})
    wrong_start = _sleeper()
    settled = _sleeper()
    procs = [recorded, marked_dead, marked_live, other_project, wrong_start, settled]
    try:
        for p in procs:  # wait until each child is really running its interpreter
            wait_for(lambda p=p: psutil.Process(p.pid).cmdline()[:1] == [sys.executable], 10,
                     what=f"pid {p.pid} to run {sys.executable}", interval=0.01)
        _record(runs, "r1", [{"pid": recorded.pid, "startTime": process_start_time(recorded.pid),
                              "runnerId": "dead-runner", "role": "worker"},
                             {"pid": wrong_start.pid, "startTime": 12345.0,
                              "runnerId": "dead-runner", "role": "worker"}])
        _record(runs, "r5", [{"pid": settled.pid, "startTime": process_start_time(settled.pid),
                              "runnerId": "dead-runner", "role": "worker"}], status="completed")
        found = {p.pid for p in find_orphans(runs, key, {"live-runner"})}
        assert found == {recorded.pid, marked_dead.pid}
        assert kill_processes([p for p in find_orphans(runs, key, {"live-runner"})]) == 2
        assert _wait_gone(recorded) == -signal.SIGKILL
        assert _wait_gone(marked_dead) == -signal.SIGKILL
        for alive in (marked_live, other_project, wrong_start, settled):
            assert alive.poll() is None
    finally:
        reap(*procs)
