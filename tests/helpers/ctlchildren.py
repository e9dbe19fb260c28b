"""Child-process bodies for the controller store tests (spawned, so importable).

Owns ``race_reconciles``: a runner that claims reconciles until the queue is
empty, proving with an exclusive marker file per key that no two processes
ever reconcile one key at once, and queueing other keys meanwhile (some
while they are being reconciled: the dirty path). Must not import pytest,
a conftest or a test module.
"""

from __future__ import annotations

import json
import os
import threading
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Barrier
from pathlib import Path

from pi_workflows.protocol.store.controllers import settled

from .store import child_store


def race_reconciles(path: str, runner: str, barrier: Barrier, marks: str, out: str,
                    keys: int, passes: int) -> None:
    """Claim until nothing is due; each reconcile holds ``marks/KEY`` exclusively."""
    got: list[list[str]] = []
    queued: list[str] = []  # what each enqueue did: added | sooner | kept | dirty
    with child_store(path, busy_timeout_ms=20_000) as store:
        barrier.wait()
        n = 0
        while (claim := store.claim_reconcile(["files"], runner, 30_000)) is not None:
            mark = Path(marks) / claim.key
            fd = os.open(mark, os.O_CREAT | os.O_EXCL | os.O_WRONLY)  # fails on overlap
            os.close(fd)
            got.append([claim.key, claim.token])
            if n < passes:  # queue a neighbour, maybe one being reconciled right now
                queued.append(store.enqueue_reconcile(
                    "files", f"k{(int(claim.key[1:]) + 1) % keys:03d}"))
            n += 1
            mark.unlink()
            store.finish_reconcile(claim.token, settled())
    Path(out).write_text(json.dumps({"got": got, "queued": queued}))


def open_and_apply(path: str, key: str, barrier: Barrier) -> None:
    """Open the store (maybe upgrading it) at the same moment as others; apply one spec."""
    barrier.wait()
    with child_store(path, busy_timeout_ms=20_000) as store:
        store.apply_spec("files", key, {"by": key})
        assert store.get("old-run") is not None


def hold_reconcile(path: str, lease_ms: int, conn: Connection) -> None:
    """Claim one reconcile, report its token, then hang until killed (a host killed -9)."""
    store = child_store(path)
    claim = store.claim_reconcile(["files"], "host-doomed", lease_ms)
    assert claim is not None
    conn.send(claim.token)
    threading.Event().wait()
