"""The bundle fence: a per-run cross-process lock plus a claim check.

Every bundle write happens inside ``fenced``: take the run's lock file,
verify in the store that the writer's claim token is current and unexpired,
write, release. A writer whose claim was lost gets ``ClaimLost`` and writes
nothing. The check is the caller's ``ClaimVerifier`` (the store), so this
module does not import ``protocol.store``. Imports ``protocol.errors``,
``protocol.paths`` and filelock (when the first lock is taken).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from .errors import PiWorkflowsError
from .paths import ensure_private_dir

if TYPE_CHECKING:  # loaded by the first lock: a reader of bundles takes none
    from filelock import FileLock

LOCK_NAME = ".bundle.lock"


class BundleLocked(PiWorkflowsError):
    """The run's lock was not free within the timeout (its holder may be stopped)."""

    code = "bundle_locked"


class CancelPending(PiWorkflowsError):
    """A write that would go on with the run was refused: a cancel was requested."""

    code = "cancel_pending"


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


def bundle_lock(bundle_dir: Path, timeout: float | None = None) -> FileLock:
    """The run's lock file; ``FileLock`` uses ``flock``, so a dead holder frees it."""
    from filelock import FileLock

    ensure_private_dir(bundle_dir)
    # A kernel lock (flock), kept at a stable path; never the soft fallback,
    # whose stale files a crashed writer would leave behind.
    return FileLock(str(bundle_dir / LOCK_NAME),
                    timeout=lock_timeout() if timeout is None else timeout, mode=0o600,
                    thread_local=False, preserve_lock_file=True)


@contextlib.contextmanager
def fenced(store: ClaimVerifier, bundle_dir: Path, run_id: str, token: str,
           *, timeout: float | None = None, lock: FileLock | None = None) -> Iterator[object]:
    """Hold the run lock while the claim is verified and the caller writes.

    Yields what the verifier returned (the store's row), so a writer can
    look at the run's flags as of this very check.

    A writer that fences often passes its own ``lock`` (from ``bundle_lock``)
    so the lock object and the directory check are not rebuilt every time.
    """
    from filelock import Timeout

    held = lock if lock is not None else bundle_lock(bundle_dir, timeout)
    try:
        held.acquire()
    except Timeout:
        raise BundleLocked(f"the bundle of run {run_id} stayed locked by another writer;"
                           " is a stopped process holding it?") from None
    try:
        yield store.verify(run_id, token)  # raises ClaimLost: nothing gets written
    finally:
        held.release()
