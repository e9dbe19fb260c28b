"""Finding and killing processes left behind by a dead runner.

Owns orphan discovery (pids recorded in unsettled bundles, and any process
carrying this project's run marker) and killing them by group and then one
by one, after checking identity: a pid is never signalled on the strength
of "it is alive" alone, and a live runner's processes are never touched.
Imports ``protocol`` and psutil; loguru only when it has a warning to log
(its import costs more than the rest of this module's).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterable
from pathlib import Path

import psutil

from ...protocol.bundle import Bundle, BundleCorrupt, list_bundles
from ...protocol.liveness import is_same_process
from ...protocol.states import SETTLED_STATUSES
from ...protocol.wire import MARKER_ENV, parse_marker


def _marker(proc: psutil.Process, project_key: str) -> tuple[str, str] | None:
    """(runner id, run id) from ``proc``'s marker if it belongs to this project."""
    try:
        value = proc.environ().get(MARKER_ENV)
    except (psutil.Error, OSError):
        return None
    return parse_marker(value, project_key)


def _marker_runner(proc: psutil.Process, project_key: str) -> str | None:
    found = _marker(proc, project_key)
    return None if found is None else found[0]


def find_run_processes(project_key: str, runner_id: str,
                       run_id: str | None = None) -> list[psutil.Process]:
    """This runner's leftover processes (of one run, or all of them, its zygote too).

    A shell command or agent leaves its worker's group and session, so a group
    kill of a dead worker misses it; its inherited marker still names the run.
    """
    me = os.getpid()
    found = []
    for proc in psutil.process_iter():
        if proc.pid == me:
            continue
        marker = _marker(proc, project_key)
        if marker is None or marker[0] != runner_id:
            continue
        if run_id is None or marker[1] == run_id:
            found.append(proc)
    return found


def find_stale_writers(runs_dir: Path, project_key: str, run_id: str,
                       owner: str) -> list[psutil.Process]:
    """Processes of ``run_id`` that belong to any runner but ``owner``, its claim holder.

    Only the claim holder may write a run's bundle; another runner's worker
    for it (a frozen terminal's, say) is stale by definition, and may still
    hold the run's lock.
    """
    me = os.getpid()
    found: dict[int, psutil.Process] = {}
    for entry in Bundle(runs_dir, run_id).processes().get("processes", []):
        pid, start = entry.get("pid"), entry.get("startTime")
        if not isinstance(pid, int) or not isinstance(start, int | float) or pid == me:
            continue
        if entry.get("runnerId") != owner and is_same_process(pid, float(start)):
            with contextlib.suppress(psutil.Error):
                found[pid] = psutil.Process(pid)
    for proc in psutil.process_iter():
        marker = _marker(proc, project_key)
        if proc.pid != me and marker is not None and marker[1] == run_id \
                and marker[0] != owner:
            found[proc.pid] = proc
    return list(found.values())


def find_orphans(runs_dir: Path, project_key: str, live_runners: set[str]) -> list[psutil.Process]:
    """Processes of this project whose owning runner is not alive."""
    me = os.getpid()
    found: dict[int, psutil.Process] = {}
    for run_id in list_bundles(runs_dir):
        bundle = Bundle(runs_dir, run_id)
        try:
            if bundle.raw_state().get("status") in SETTLED_STATUSES:
                continue
        except BundleCorrupt:
            pass
        for entry in bundle.processes().get("processes", []):
            pid, start = entry.get("pid"), entry.get("startTime")
            if not isinstance(pid, int) or not isinstance(start, int | float) or pid == me:
                continue
            if entry.get("runnerId") in live_runners or not is_same_process(pid, float(start)):
                continue
            with contextlib.suppress(psutil.Error):
                found[pid] = psutil.Process(pid)
    for proc in psutil.process_iter():
        if proc.pid == me or proc.pid in found:
            continue
        runner = _marker_runner(proc, project_key)
        if runner is not None and runner not in live_runners:
            found[proc.pid] = proc
    return list(found.values())


def kill_processes(procs: Iterable[psutil.Process], *, timeout: float = 5.0) -> int:
    """SIGKILL each process's group (when it leads one) and the process; wait for them."""
    targets = []
    for proc in procs:
        try:
            # psutil.Process checks its create time on each call, so a reused
            # pid raises NoSuchProcess here instead of being signalled.
            if os.getpgid(proc.pid) == proc.pid and proc.is_running():
                os.killpg(proc.pid, signal.SIGKILL)
            proc.kill()
            targets.append(proc)
        except (psutil.Error, ProcessLookupError, PermissionError):
            continue
    # Poll rather than wait: waiting on one of our own children would reap it
    # and steal its exit status from the handle that owns it.
    deadline = time.monotonic() + timeout
    alive = [p for p in targets if _alive(p)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.02)
        alive = [p for p in alive if _alive(p)]
    if alive:
        from loguru import logger

        for proc in alive:
            logger.warning("process {} survived SIGKILL", proc.pid)
    return len(targets)


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
