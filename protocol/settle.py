"""Settling a run that no worker owns, so bundle and queue agree.

Owns writing a terminal event into a bundle whose workflow will not run
again (cancelling a parked run; a run whose workflow no longer loads), and
re-pinning a parked run's changed source (``resume --force``), always
through the fenced writer of a claim the caller holds. Imports protocol
modules only.
"""

from __future__ import annotations

from pathlib import Path

from .bundle import Bundle, BundleWriter
from .discovery import load_workflow_file
from .errors import TransitionRefused
from .runstate import ErrorInfo, RunState, ending
from .states import SETTLED_STATUSES, QueueState
from .store import QueueRow, Store

CANCELLED: ErrorInfo = {"code": "cancelled", "message": "the run was cancelled"}


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


def settle_bundle(writer: BundleWriter, event_type: str, error: ErrorInfo) -> None:
    """Write a terminal event into an unsettled bundle without running its workflow."""
    state, _ = writer.reopen()
    if state.get("status") in SETTLED_STATUSES:
        return
    changes, payload = ending(event_type, error)
    ended = RunState(**state)
    ended.update(changes)
    writer.append(event_type, payload, ended)


def repin_source(store: Store, runs_dir: Path, run_id: str, runner_id: str, *,
                 fsync: str = "node") -> QueueRow:
    """``resume --force`` for a run blocked on a changed workflow file.

    Claims the parked run, records the old and new source in its trace
    (``source_repinned``), pins the new one in the manifest, and parks it
    again unblocked, so the next runner resumes it on the new definition.
    """
    row = store.get(run_id)
    if row is None or row.state != QueueState.PARKED:
        raise TransitionRefused(f"run {run_id} is not parked; only a parked run is resumed")
    bundle = Bundle(runs_dir, run_id)
    manifest = bundle.manifest()
    loaded = load_workflow_file((manifest.get("source") or {}).get("path") or row.source_path)
    claim = store.claim_by_id(run_id, runner_id)
    writer = BundleWriter(bundle, store, claim.token, fsync=fsync)
    old = manifest.get("source") or {}
    writer.repin({"path": loaded.source.path, "sha256": loaded.source.sha256}, loaded.digest, {
        "forced": True, "sourceMismatch": {
            "expectedSha256": old.get("sha256"), "actualSha256": loaded.source.sha256,
            "expectedDigest": manifest.get("digest"), "actualDigest": loaded.digest}})
    store.mark_running(run_id, claim.token)
    return store.park(run_id, claim.token)
