"""Proof that a runner process is dead on this machine.

A pid alone proves nothing (pids are reused): a runner is dead only if it
ran on this host and its pid is gone, is a zombie, or now belongs to a
process with another start time. On Linux the check reads ``/proc`` the way
psutil does (so a command that only asks "is the host alive?" does not load
psutil); elsewhere, and for anything ``/proc`` does not settle, psutil
answers, imported when first needed. Imports nothing from the store.
"""

from __future__ import annotations

import os
import sys

# psutil derives create_time from boot time + clock ticks; tiny float noise.
_START_TIME_TOLERANCE_S = 0.05


def host_name() -> str:
    import socket  # with selectors, a tenth of a read-only command's start

    return socket.gethostname()


def process_start_time(pid: int | None = None) -> float:
    """When ``pid`` started, as psutil says; from ``/proc`` where it can (a forked
    worker records its own on the hot path, and psutil's import costs ~15 ms)."""
    target = pid if pid is not None else os.getpid()
    seen = _proc_stat(target)
    if isinstance(seen, tuple):
        return seen[1]
    import psutil

    return psutil.Process(target).create_time()


_GONE = "gone"


def _proc_stat(pid: int) -> tuple[str, float] | str | None:
    """Linux: (state letter, start time exactly as psutil computes it) from ``/proc``;
    ``_GONE`` when there is no such process; None when only psutil can tell.

    Proving a host alive is what ``sync`` and ``run --detach`` do on every call;
    this spares them psutil's import, which costs more than the rest of the command.
    """
    if pid <= 0 or not sys.platform.startswith("linux"):
        return None
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read()
        with open("/proc/stat", "rb") as fh:
            boot = next(float(line.split()[1]) for line in fh if line.startswith(b"btime"))
        fields = data[data.rfind(b")") + 2:].split()
        # psutil: float(starttime) / CLOCK_TICKS + boot_time(), in that order.
        return fields[0].decode(), float(fields[19]) / os.sysconf("SC_CLK_TCK") + boot
    except FileNotFoundError:
        return _GONE
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def is_same_process(pid: int, start_time: float) -> bool:
    """True if ``pid`` is alive and is still the process that started at ``start_time``."""
    seen = _proc_stat(pid)
    if seen == _GONE:
        return False
    if isinstance(seen, tuple):
        state, started = seen
        return state != "Z" and abs(started - start_time) <= _START_TIME_TOLERANCE_S
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
