"""Giving a claim back without ending the run, for any runner that holds one.

Imports ``protocol`` only.
"""

from __future__ import annotations

from pathlib import Path

from loguru import logger

from ..protocol.bundle import bundle_exists
from ..protocol.errors import PiWorkflowsError
from ..protocol.store import Claim, Store


def give_back(store: Store, runs_dir: Path, claim: Claim) -> None:
    """Park the run (or requeue it if it has no bundle yet) so any runner can take it."""
    try:
        row = store.get(claim.run_id)
        if row is None or row.claim_token != claim.token:
            return
        if row.state == "starting":
            if not bundle_exists(runs_dir, claim.run_id):
                store.release_starting(claim.run_id, claim.token)
                return
            store.mark_running(claim.run_id, claim.token)
        store.park(claim.run_id, claim.token)
    except PiWorkflowsError as exc:
        logger.warning("could not give back run {}: {}", claim.run_id, exc)
