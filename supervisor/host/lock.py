"""The host lock: one host per project, held with a kernel advisory lock.

The lock is ``flock`` on the host lock file (released by the kernel when
the holder dies, however it dies). The file's JSON content (``pid``,
``pidStartTime``, ``runnerId``, ``startedAt``, and ``ready`` once start-up
is over: lock, registration, orphan reaping, takeover and the wakeup
socket; ``agentDir`` and ``providerEnv``, the host's Pi agent dir and the
*names* of the provider variables in its environment, never their values)
is for error messages, people and scripts that wait for a host or
stop it (``pid`` with ``pidStartTime`` proves which process holds it, as a
pid alone cannot); the flock alone decides who holds it. Imports
``protocol`` helpers only.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from pathlib import Path
from typing import Any

from ...protocol.clock import now_ms
from ...protocol.errors import UsageError
from ...protocol.liveness import process_start_time
from ...protocol.paths import ensure_private_dir


class HostLockHeld(UsageError):
    code = "host_running"


class HostLock:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        self._info: dict[str, Any] = {}

    def acquire(self, runner_id: str, extra: dict[str, Any] | None = None) -> None:
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
        self._fd = fd
        self._info = {"pid": os.getpid(), "pidStartTime": process_start_time(),
                      "runnerId": runner_id, "startedAt": now_ms(), "ready": False,
                      **(extra or {})}
        self._write()

    def _write(self) -> None:
        assert self._fd is not None
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, (json.dumps(self._info) + "\n").encode(), 0)

    def mark_ready(self) -> None:
        """Say in the file that the holder has finished starting and serves runs."""
        self._info.update(ready=True, readyAt=now_ms())
        self._write()

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
