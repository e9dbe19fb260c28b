"""Pausing a run and lifting the pause: the request path of ``pause`` and ``resume``.

Owns the decision of what ``pause`` does to a run: a queued or parked run is
held at once; a starting or running one gets the ``paused`` code on its row
(``Store.request_pause``, one checked compare-and-set) and its worker a
nudge, so it parks at its next node boundary (the node in progress
finishes); a run waiting at a checkpoint, or one that ended, is refused.
Also waiting for a running run to reach its boundary. Imports ``protocol``
and ``supervisor.session.nudge`` (and ``cancel``'s bundle reader); never the
worker, ``host`` or ``cli``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ...protocol.errors import TransitionRefused
from ...protocol.states import CLAIMED, TERMINAL, RunStatus, is_paused
from ...protocol.store import QueueRow, Store
from .cancel import WAIT_S, bundle_status
from .nudge import nudge_worker


@dataclass(frozen=True)
class Paused:
    row: QueueRow
    paused: bool  # held now (False: still asked for, or the run ended first)
    status: str | None  # the bundle's status (None: no bundle)


def request(store: Store, runs_dir: Path, row: QueueRow) -> QueueRow:
    """Ask for the pause; the row right after (a running run may still be running)."""
    run_id = row.run_id
    if row.state in TERMINAL:
        waiting = bundle_status(runs_dir, run_id) == RunStatus.WAITING
        raise TransitionRefused(
            f"run {run_id} is waiting at a checkpoint; nothing runs until it is answered"
            if waiting else f"run {run_id} already {bundle_status(runs_dir, run_id) or row.state};"
            " nothing to pause", code="run_waiting" if waiting else "run_settled")
    row = store.request_pause(run_id)
    if row.state in CLAIMED:
        # The worker renews at once and sees the request; the fence of its
        # next node_started refuses it in any case.
        nudge_worker(runs_dir, run_id)
    return row


def settle_wait(store: Store, runs_dir: Path, run_id: str, *, timeout_s: float = WAIT_S,
                monotonic: Callable[[], float] = time.monotonic,
                sleep: Callable[[float], None] = time.sleep) -> Paused:
    """Poll until the run is no longer claimed (or ``timeout_s``); how it stands then."""
    deadline = monotonic() + timeout_s
    while True:
        row = store.get(run_id)
        if row is None:
            raise TransitionRefused(f"run {run_id} vanished from the queue")
        if row.state not in CLAIMED or monotonic() >= deadline:
            return Paused(row, is_paused(row.state, row.error_code),
                          bundle_status(runs_dir, run_id))
        sleep(0.05)
