"""The host lock: one host per project, held with a kernel advisory lock.

The lock is ``flock`` on the host lock file (released by the kernel when
the holder dies, however it dies); the file's JSON content
(``pid``, ``runnerId``, ``startedAt``) is only for humans and error
messages. Imports ``protocol.errors`` and settings helpers.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from pathlib import Path
from typing import Any

from .clock import now_ms
from .errors import UsageError
from .paths import ensure_private_dir


class HostLockHeld(UsageError):
    code = "host_running"


class HostLock:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self, runner_id: str) -> None:
        """Take the lock without waiting, or raise ``HostLockHeld`` naming the holder."""
        ensure_private_dir(self.path.parent)
        # No O_TRUNC: a losing contender must not wipe the holder's details.
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            holder = self.holder()
            pid = holder.get("pid", "unknown")
            raise HostLockHeld(f"another host (pid {pid}) is already running for this project;"
                               " stop it first") from None
        info = json.dumps({"pid": os.getpid(), "runnerId": runner_id, "startedAt": now_ms()})
        os.ftruncate(fd, 0)
        os.pwrite(fd, (info + "\n").encode(), 0)
        self._fd = fd

    def holder(self) -> dict[str, Any]:
        try:
            return dict(json.loads(self.path.read_text() or "{}"))
        except (OSError, ValueError):
            return {}

    def release(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, 0)
        os.close(self._fd)  # closing the descriptor releases the flock
        self._fd = None
