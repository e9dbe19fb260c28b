"""What a runner does with a claim once its worker is gone.

Owns two decisions every runner (host or terminal session) shares: whether
a worker's exit left our claim behind (a crash, or a clean-looking exit that
kept the claim), in which case the run's leftover processes are killed
before anything reruns its node; and giving a claim back without ending the
run. Imports ``protocol`` and the supervisor's OS layer.
"""

from __future__ import annotations

from pathlib import Path

from loguru import logger

from ...protocol.bundle import bundle_exists
from ...protocol.errors import PiWorkflowsError
from ...protocol.states import QueueState
from ...protocol.store import Claim, Store
from ...protocol.wire import CLEAN_EXITS
from .oslayer import OsLayer


def left_behind(store: Store, claim: Claim, code: int) -> bool:
    """True unless the worker exited cleanly *and* no longer holds ``claim``."""
    row = store.get(claim.run_id)
    still_ours = row is not None and row.claim_token == claim.token
    return code not in CLEAN_EXITS or still_ours


def after_exit(store: Store, os_layer: OsLayer, project_key: str, claim: Claim,
               code: int) -> bool:
    """Handle a worker's exit; True if it left ``claim`` to us (a crash, in effect).

    Then its shell commands or agents may still run, outside its process
    group: they are killed here, before the run is restarted or given back.
    """
    if not left_behind(store, claim, code):
        return False
    os_layer.kill(os_layer.run_processes(project_key, claim.runner_id, claim.run_id))
    return True


def give_back(store: Store, runs_dir: Path, claim: Claim, *, code: str | None = None,
              message: str | None = None) -> None:
    """Park the run (or requeue it if it has no bundle yet) so any runner can take it.

    With ``code`` it is parked *blocked*: it waits for a person's `resume`.
    """
    try:
        row = store.get(claim.run_id)
        if row is None or row.claim_token != claim.token:
            return
        if row.state == QueueState.STARTING:
            if not bundle_exists(runs_dir, claim.run_id):
                store.release_starting(claim.run_id, claim.token)
                return
            store.mark_running(claim.run_id, claim.token)
        store.park(claim.run_id, claim.token, code=code, message=message)
    except PiWorkflowsError as exc:
        logger.warning("could not give back run {}: {}", claim.run_id, exc)
