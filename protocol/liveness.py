"""Proof that a runner process is dead on this machine.

A pid alone proves nothing (pids are reused): a runner is dead only if it
ran on this host and its pid is gone, is a zombie, or now belongs to a
process with another start time. Imports psutil (when first asked: the
command line's read-only commands often never are) and nothing from the store.
"""

from __future__ import annotations

import os

# psutil derives create_time from boot time + clock ticks; tiny float noise.
_START_TIME_TOLERANCE_S = 0.05


def host_name() -> str:
    import socket  # with selectors, a tenth of a read-only command's start

    return socket.gethostname()


def process_start_time(pid: int | None = None) -> float:
    import psutil

    return psutil.Process(pid if pid is not None else os.getpid()).create_time()


def is_same_process(pid: int, start_time: float) -> bool:
    """True if ``pid`` is alive and is still the process that started at ``start_time``."""
    import psutil

    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        return abs(proc.create_time() - start_time) <= _START_TIME_TOLERANCE_S
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return False
    except psutil.AccessDenied:
        return True  # exists and we cannot prove otherwise


def runner_is_dead(pid: int, start_time: float, runner_host: str) -> bool:
    """Provably dead: same machine, and the (pid, start time) incarnation is gone."""
    if runner_host != host_name():
        return False  # no proof across machines: only lease expiry frees its claims
    return not is_same_process(pid, start_time)
