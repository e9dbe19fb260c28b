"""Settling a run that no worker owns, so bundle and queue agree.

Owns cancelling a parked run: the caller claims it like any runner would,
writes ``run_cancelled`` into its bundle through the fenced writer, then
moves the queue row to ``cancelled``. Imports protocol modules only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .bundle import SETTLED_STATUSES, Bundle, BundleWriter
from .store import QueueRow, Store

CANCELLED = {"code": "cancelled", "message": "the run was cancelled"}


def cancel_parked(store: Store, runs_dir: Path, run_id: str, runner_id: str, *,
                  fsync: str = "node") -> QueueRow:
    """``parked -> starting -> cancelled`` with the terminal event in the bundle.

    If this is interrupted half-way, the claim simply expires and the run is
    resumed by the next runner, as after any crash.
    """
    claim = store.claim_by_id(run_id, runner_id)
    bundle = Bundle(runs_dir, run_id)
    if bundle.exists():
        writer = BundleWriter(bundle, store, claim.token, fsync=fsync)
        state, _ = writer.reopen()
        if state.get("status") not in SETTLED_STATUSES:
            ended: dict[str, Any] = {**state, "status": "cancelled", "currentNode": None,
                                     "currentAttempt": None, "pendingEnd": None,
                                     "error": CANCELLED}
            writer.append("run_cancelled", {"error": CANCELLED}, ended)
    return store.cancel(run_id, claim.token)
