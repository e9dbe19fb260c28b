"""Who holds a run's bundle lock: the kernel's flock table, read from ``/proc/locks``.

Owns naming the holder of a bundle lock that no recorded or marked process
explains (a stray process outside pi-workflows), so the host can say who
it is instead of counting the wait as a crash. Linux only; elsewhere it
finds nobody. Imports ``protocol.fence`` and psutil.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

import psutil

from ...protocol.fence import LOCK_NAME

PROC_LOCKS = Path("/proc/locks")


@dataclass(frozen=True)
class Holder:
    pid: int
    name: str  # the process name, "?" if it cannot be read

    def describe(self) -> str:
        return f"pid {self.pid} ({self.name})"


def _file_id(path: Path) -> str | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    # /proc/locks spells a file as MAJOR:MINOR:INODE, the device numbers in hex.
    return f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"


def flock_holders(path: Path, table: Path = PROC_LOCKS) -> list[Holder]:
    """The live processes the kernel says hold an flock on ``path``."""
    wanted = _file_id(path)
    if wanted is None:
        return []
    try:
        lines = table.read_text().splitlines()
    except OSError:
        return []
    holders: dict[int, Holder] = {}
    for line in lines:
        fields = line.split()
        # "1: FLOCK  ADVISORY  WRITE 30898 fe:00:2147172 0 EOF"; blocked waiters
        # carry a "->" marker and are not holders.
        if len(fields) < 6 or fields[1] != "FLOCK" or "->" in fields:
            continue
        if fields[5] != wanted or not fields[4].isdigit():
            continue
        pid = int(fields[4])
        name = "?"
        with contextlib.suppress(psutil.Error):
            name = psutil.Process(pid).name()
        if psutil.pid_exists(pid):
            holders[pid] = Holder(pid, name)
    return list(holders.values())


def bundle_lock_holders(bundle_dir: Path) -> list[Holder]:
    return flock_holders(bundle_dir / LOCK_NAME)
