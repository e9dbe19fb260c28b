"""Settling a run that no worker owns, so bundle and queue agree.

Owns writing a terminal event into a bundle whose workflow will not run
again (cancelling a parked run; a run whose workflow no longer loads), and
re-pinning a parked run's changed source (``resume --force``), always
through the fenced writer of a claim the caller holds. Imports protocol
modules only.
"""

from __future__ import annotations

from pathlib import Path

from .bundle import Bundle
from .bundlewriter import BundleWriter
from .definitions.discovery import load_workflow_file
from .errors import ClaimLost, TransitionRefused
from .includepins import included_files
from .runstate import ErrorInfo, RunState, ending
from .states import SETTLED_STATUSES, UNOWNED, QueueState
from .store import QueueRow, Store

CANCELLED: ErrorInfo = {"code": "cancelled", "message": "the run was cancelled"}


class Unclaimed:
    """The fence for writing to a parked (or queued) run without claiming it.

    Every writer with a claim takes the bundle lock and then checks its
    token; holding the lock while the row is still parked and unclaimed
    proves nobody else writes meanwhile. A runner that claims the run right
    after finds what was written (a settled bundle is never resumed), and
    parked runs never enter their session's one active slot this way.
    """

    def __init__(self, store: Store) -> None:
        self.store = store

    def verify(self, run_id: str, token: str) -> QueueRow:
        row = self.store.get(run_id)
        if row is None or row.state not in UNOWNED or row.claim_token is not None:
            raise ClaimLost(f"run {run_id} is no longer parked or queued")
        return row


def _unclaimed_writer(store: Store, bundle: Bundle, fsync: str) -> BundleWriter:
    return BundleWriter(bundle, Unclaimed(store), "", fsync=fsync)


def cancel_parked(store: Store, runs_dir: Path, run_id: str, *, fsync: str = "node",
                  by_session: str | None = None) -> QueueRow:
    """``parked -> cancelled`` with the terminal event in the bundle first.

    Also for a queued run that already has a bundle (a fork, laid out before
    it was queued).

    ``ClaimLost`` means a runner resumed the run meanwhile: ask its owner
    instead (``request_cancel``). Interrupted between the two writes, the
    bundle is cancelled and the row still parked: the next runner to take it
    finds a settled bundle and cancels the row too. ``by_session``: the
    model of that session asked for the cancel (``Store.cancel``).
    """
    bundle = Bundle(runs_dir, run_id)
    if bundle.exists():
        settle_bundle(_unclaimed_writer(store, bundle, fsync), "run_cancelled", CANCELLED)
    return store.cancel(run_id, by_session=by_session)


def settle_bundle(writer: BundleWriter, event_type: str, error: ErrorInfo) -> None:
    """Write a terminal event into an unsettled bundle without running its workflow."""
    state, _ = writer.reopen()
    if state.get("status") in SETTLED_STATUSES:
        return
    changes, payload = ending(event_type, error)
    ended = RunState(**state)
    ended.update(changes)
    writer.append(event_type, payload, ended)


def repin_source(store: Store, runs_dir: Path, run_id: str, *,
                 fsync: str = "node") -> QueueRow:
    """``resume --force`` for a run blocked on a changed workflow file.

    Records the old and new source in the parked run's trace
    (``source_repinned``), pins the new one in the manifest, and unblocks the
    row, so the next runner resumes it on the new definition.
    """
    row = store.get(run_id)
    if row is None or row.state != QueueState.PARKED:
        raise TransitionRefused(f"run {run_id} is not parked; only a parked run is resumed")
    bundle = Bundle(runs_dir, run_id)
    manifest = bundle.manifest()
    loaded = load_workflow_file((manifest.get("source") or {}).get("path") or row.source_path)
    writer = _unclaimed_writer(store, bundle, fsync)
    old = manifest.get("source") or {}
    writer.repin({"path": loaded.source.path, "sha256": loaded.source.sha256}, loaded.digest, {
        "forced": True, "sourceMismatch": {
            "expectedSha256": old.get("sha256"), "actualSha256": loaded.source.sha256,
            "expectedDigest": manifest.get("digest"), "actualDigest": loaded.digest}},
        included_files(loaded.workflow) or ({"includes": []} if "includes" in manifest else {}))
    return store.unblock(run_id)
