"""The bundle fence: a per-run cross-process lock plus a claim check.

Every bundle write happens inside ``fenced``: take the run's lock file,
verify in the store that the writer's claim token is current and unexpired,
write, release. A writer whose claim was lost gets ``ClaimLost`` and writes
nothing. The check is the caller's ``ClaimVerifier`` (the store), so this
module does not import ``protocol.store``. Imports ``protocol.errors`` and
``protocol.paths``.

The lock is ``flock(2)`` on one stable file per bundle, taken here rather
than through filelock: a fence is taken about twice per node on the hot
path, and filelock 4's bookkeeping costs ~280 us per acquire and release
against ~10 us for the system calls themselves (``bench engine`` shows the
difference per transition). The host lock (``supervisor.host.lock``) is a
plain flock for the same kind of reason.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

from .errors import PiWorkflowsError
from .paths import ensure_private_dir

LOCK_NAME = ".bundle.lock"


class BundleLocked(PiWorkflowsError):
    """The run's lock was not free within the timeout (its holder may be stopped)."""

    code = "bundle_locked"


class CancelPending(PiWorkflowsError):
    """A write that would go on with the run was refused: a cancel was requested."""

    code = "cancel_pending"


class PausePending(PiWorkflowsError):
    """A node was about to start on a run asked to pause: it holds at this boundary."""

    code = "pause_pending"


class ClaimVerifier(Protocol):
    def verify(self, run_id: str, token: str) -> object: ...


LOCK_TIMEOUT_S = 30.0


def lock_timeout() -> float:
    """How long a writer waits for a run's lock: ``PI_WORKFLOWS_LOCK_TIMEOUT_S``, else 30 s."""
    try:
        value = float(os.environ.get("PI_WORKFLOWS_LOCK_TIMEOUT_S", LOCK_TIMEOUT_S))
    except ValueError:
        return LOCK_TIMEOUT_S
    return value if value > 0 else LOCK_TIMEOUT_S


class LockTimeout(Exception):
    """The lock stayed held by another open file for the whole timeout."""


# First and last pause between tries while another process holds the lock.
_FIRST_PAUSE_S = 0.001
_LAST_PAUSE_S = 0.05


class RunLock:
    """The run's lock file, held with ``flock``: the kernel frees it when its holder dies.

    Re-entrant within a thread (a write inside a write keeps it held) and
    exclusive between the threads of a process as well as between
    processes. The file is kept at its stable path, never removed, mode 0600.
    """

    def __init__(self, path: Path, timeout: float) -> None:
        self.path = path
        self.timeout = timeout
        self._fd: int | None = None
        self._depth = 0
        self._threads = threading.RLock()

    def acquire(self) -> None:
        if not self._threads.acquire(timeout=self.timeout):
            raise LockTimeout(str(self.path))
        if self._depth:
            self._depth += 1
            return
        try:
            self._fd = self._lock_file(time.monotonic() + self.timeout)
        except BaseException:
            self._threads.release()
            raise
        self._depth = 1

    def release(self) -> None:
        if not self._depth:
            raise RuntimeError(f"{self.path} is not held")
        self._depth -= 1
        if not self._depth and self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)  # closing the only descriptor of the open file unlocks it
        self._threads.release()

    def __enter__(self) -> RunLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def _lock_file(self, deadline: float) -> int:
        pause = _FIRST_PAUSE_S
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                while True:
                    if _try_flock(fd):
                        if _same_file(fd, self.path):
                            return fd
                        break  # we locked a file that is no longer the one at the path
                    if not _same_file(fd, self.path):
                        break  # replaced while we waited: wait on the one there now
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise LockTimeout(str(self.path))
                    time.sleep(min(pause, left))
                    pause = min(pause * 2, _LAST_PAUSE_S)
            except BaseException:
                os.close(fd)
                raise
            os.close(fd)


def _try_flock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _same_file(fd: int, path: Path) -> bool:
    try:
        now = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (held.st_dev, held.st_ino) == (now.st_dev, now.st_ino)


def bundle_lock(bundle_dir: Path, timeout: float | None = None) -> RunLock:
    """The run's lock (a kernel flock on a stable file), not yet taken."""
    ensure_private_dir(bundle_dir)
    return RunLock(bundle_dir / LOCK_NAME, lock_timeout() if timeout is None else timeout)


@contextlib.contextmanager
def fenced(store: ClaimVerifier, bundle_dir: Path, run_id: str, token: str,
           *, timeout: float | None = None, lock: RunLock | None = None) -> Iterator[object]:
    """Hold the run lock while the claim is verified and the caller writes.

    Yields what the verifier returned (the store's row), so a writer can
    look at the run's flags as of this very check.

    A writer that fences often passes its own ``lock`` (from ``bundle_lock``)
    so the lock object and the directory check are not rebuilt every time.
    """
    held = lock if lock is not None else bundle_lock(bundle_dir, timeout)
    try:
        held.acquire()
    except LockTimeout:
        raise BundleLocked(f"the bundle of run {run_id} stayed locked by another writer;"
                           " is a stopped process holding it?") from None
    try:
        yield store.verify(run_id, token)  # raises ClaimLost: nothing gets written
    finally:
        held.release()
