"""Cancelling a run, whatever state it is in, and waiting for it to come to rest.

Owns the one decision of what ``cancel`` does to a run: a queued, starting
(bundle-less) or parked run is cancelled at once (a parked one's bundle
first); a running one gets the store's cancel flag and its worker a nudge,
so it stops within about a second (the node in progress gets its stop
signal, and no node starts after it); a run waiting at a checkpoint has
its wait closed (``Store.close_wait``); an answered one is refused, naming
the chain's live end. Imports ``protocol``, ``supervisor.session.nudge`` and
``views.nextcmd``; never the worker.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ...protocol.bundle import Bundle, BundleCorrupt
from ...protocol.errors import ClaimLost, TransitionRefused
from ...protocol.settle import cancel_parked
from ...protocol.states import CLAIMED, QueueState, RunStatus, seen_status
from ...protocol.store import QueueRow, Store
from ..views.nextcmd import answered_advice
from .nudge import nudge_worker

Q = QueueState
# How long `cancel` waits for a running run to stop before it returns anyway.
WAIT_S = 15.0


@dataclass(frozen=True)
class Cancelled:
    row: QueueRow
    status: str | None  # the run status a person is shown (None: no bundle)


def bundle_status(runs_dir: Path, run_id: str) -> str | None:
    bundle = Bundle(runs_dir, run_id)
    try:
        return bundle.state().get("status") if bundle.exists() else None
    except (BundleCorrupt, OSError, ValueError):
        return None


def request(store: Store, runs_dir: Path, row: QueueRow, *, fsync: str,
            project: Path | None = None, by_session: str | None = None) -> QueueRow:
    """Ask for the cancel; the row right after (a running run may still be running).

    ``project`` goes into a command the refusal suggests (``--project``).
    ``by_session``: the model of that session asked for it (``cancel
    --by-agent``), so the session gets one turn once the run ended
    cancelled (``protocol.store.turns``); a person's cancel gives none.
    """
    run_id = row.run_id
    if row.state == Q.RUNNING or (row.state == Q.STARTING
                                  and Bundle(runs_dir, run_id).exists()):
        # Its owner writes the terminal event, so the bundle agrees.
        row = store.request_cancel(run_id, by_session=by_session)
        nudge_worker(runs_dir, run_id)
        return row
    if row.state == Q.PARKED or (row.state == Q.QUEUED and Bundle(runs_dir, run_id).exists()):
        # The bundle is settled first (a queued fork has one already).
        try:
            return cancel_parked(store, runs_dir, run_id, fsync=fsync, by_session=by_session)
        except ClaimLost:  # a runner resumed it meanwhile: ask its owner
            row = store.request_cancel(run_id, by_session=by_session)
            nudge_worker(runs_dir, run_id)
            return row
    if row.state == Q.DONE:
        child = store.continuation_of(run_id)
        if child is not None:
            # An answered wait is over; what still runs is the chain's live end.
            raise TransitionRefused(answered_advice(store, runs_dir, row, child, verb="cancel",
                                                    project=project), code="run_answered")
        status = bundle_status(runs_dir, run_id)
        if status != RunStatus.WAITING:
            raise TransitionRefused(f"run {run_id} already {status or 'ended'}; nothing to"
                                    " cancel", code="run_settled")
        return store.close_wait(run_id)
    if row.state in (Q.FAILED, Q.CANCELLED):
        raise TransitionRefused(f"run {run_id} already {row.state}; nothing to cancel",
                                code="run_settled")
    return store.cancel(run_id, by_session=by_session)


def settle_wait(store: Store, runs_dir: Path, run_id: str, *, fsync: str = "node",
                timeout_s: float = WAIT_S, monotonic: Callable[[], float] = time.monotonic,
                sleep: Callable[[float], None] = time.sleep) -> Cancelled:
    """Poll until the run is no longer claimed (or ``timeout_s``); how it stands then."""
    deadline = monotonic() + timeout_s
    while True:
        row = store.get(run_id)
        if row is None:
            raise TransitionRefused(f"run {run_id} vanished from the queue")
        if row.state == Q.PARKED and row.cancel_requested:
            # Its owner parked it (a drain) before it saw the request: the
            # request still stands, so it is carried out here.
            try:
                row = cancel_parked(store, runs_dir, run_id, fsync=fsync)
            except ClaimLost:
                continue  # a runner took it meanwhile: it sees the flag itself
        if row.state not in CLAIMED or monotonic() >= deadline:
            status = seen_status(row.state, bundle_status(runs_dir, run_id), row.cancel_requested)
            return Cancelled(row, status)
        sleep(0.05)
