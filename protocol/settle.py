"""Settling a run that no worker owns, so bundle and queue agree.

Owns writing a terminal event into a bundle whose workflow will not run
again (cancelling a parked run; a run whose workflow no longer loads),
always through the fenced writer of a claim the caller holds. Imports
protocol modules only.
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
        settle_bundle(BundleWriter(bundle, store, claim.token, fsync=fsync), "run_cancelled",
                      CANCELLED)
    return store.cancel(run_id, claim.token)


def settle_bundle(writer: BundleWriter, event_type: str, error: dict[str, str]) -> None:
    """Write a terminal event into an unsettled bundle without running its workflow."""
    state, _ = writer.reopen()
    if state.get("status") in SETTLED_STATUSES:
        return
    status = {"run_cancelled": "cancelled", "run_failed": "failed"}[event_type]
    ended: dict[str, Any] = {**state, "status": status, "currentNode": None,
                             "currentAttempt": None, "pendingEnd": None, "error": error}
    writer.append(event_type, {"error": error}, ended)
