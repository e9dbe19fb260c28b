"""What a runner does with a claim once its worker is gone.

Owns the decisions every runner (host or terminal session) shares: whether
a worker's exit left our claim behind (a crash, or a clean-looking exit that
kept the claim), in which case the run's leftover processes are killed
before anything reruns its node; giving a claim back without ending the
run (parked, or parked blocked for a person); and failing a claimed run in
its bundle and the queue alike. Imports ``protocol`` and the procs wing's
OS layer and lock holders; never the host or a session. loguru and the
bundle writer only where they are used (a warning; failing a run): a
session runner imports this module before it starts its worker.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ...protocol.bundle import Bundle, bundle_exists
from ...protocol.diskfull import DISK_FULL, disk_full_line, is_disk_full
from ...protocol.errors import PiWorkflowsError
from ...protocol.fence import BundleLocked
from ...protocol.limits import safe_error_message
from ...protocol.states import QueueState
from ...protocol.store import Claim, Store
from ...protocol.wire import CLEAN_EXITS
from .oslayer import OsLayer

if TYPE_CHECKING:
    import psutil

    from .lockholders import Holder


def _warn(message: str, *args: object) -> None:
    from loguru import logger

    logger.opt(depth=1).warning(message, *args)


def left_behind(store: Store, claim: Claim, code: int) -> bool:
    """True unless the worker exited cleanly *and* no longer holds ``claim``."""
    row = store.get(claim.run_id)
    still_ours = row is not None and row.claim_token == claim.token
    return code not in CLEAN_EXITS or still_ours


def after_exit(store: Store, os_layer: OsLayer, project_key: str, claim: Claim,
               code: int) -> bool:
    """Handle a worker's exit; True if it left ``claim`` to us (a crash, in effect).

    Then its shell commands or agents may still run, outside its process
    group: they are killed here, before the run is restarted or given back, and
    the temporary directories it left are removed.
    """
    if not left_behind(store, claim, code):
        return False
    os_layer.kill(os_layer.run_processes(project_key, claim.runner_id, claim.run_id))
    # A killed worker could not remove its bridge socket's and Pi's temporary directories.
    os_layer.sweep_tempdirs()
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
        _warn("could not give back run {}: {}", claim.run_id, exc)


def lock_blockers(os_layer: OsLayer, runs_dir: Path, project_key: str, runner_id: str,
                  run_id: str) -> tuple[list[psutil.Process], list[Holder]]:
    """Why a run's bundle stayed locked: (stale writers to kill, every holder of the lock).

    Stale: a writer under a claim that is void, or our own leftover for this
    run (its worker has exited).
    """
    stale = os_layer.stale_writers(runs_dir, project_key, run_id, runner_id)
    holders = os_layer.lock_holders(Bundle(runs_dir, run_id).dir)
    mine = {p.pid: p for p in os_layer.run_processes(project_key, runner_id, run_id)}
    return stale + [mine[h.pid] for h in holders if h.pid in mine], holders


def park_locked(store: Store, runs_dir: Path, claim: Claim, holders: list[Holder]) -> str:
    """Park a run blocked because something that is no worker of it holds its lock.

    Not a crash, and not ours to kill: the run waits for a person. Returns
    who holds it, for the log.
    """
    who = ", ".join(h.describe() for h in holders) or "a process it could not identify"
    give_back(store, runs_dir, claim, code="bundle_locked",
              message=f"its bundle stayed locked by {who}, which is not a worker of this"
                      f" run; stop it, then `pi-workflows resume {claim.run_id}`")
    return who


def park_disk_full(store: Store, runs_dir: Path, claim: Claim, why: str) -> None:
    """Park a run blocked with ``disk_full``: its bundle cannot be written for want of space.

    Not a crash: the host that sees space again unblocks it (so does
    `pi-workflows resume RUN`).
    """
    give_back(store, runs_dir, claim, code=DISK_FULL,
              message=f"{why}; the run resumes by itself once there is space")


def fail_claimed(store: Store, runs_dir: Path, claim: Claim, code: str, message: str, *,
                 lock_timeout: float) -> str | None:
    """Fail a claimed run in its bundle too, so queue and bundle agree.

    A bundle that stays locked cannot record the failure: the queue is then
    not made terminal either; the run is parked blocked with the reason, for
    a person to `resume` or `cancel`. Nor can a bundle on a full disk: the
    run is parked blocked with ``disk_full`` and goes on once there is space
    (a crash loop there was most likely the full disk's doing). Returns the
    code it was parked with, or None once it failed.
    """
    from ...protocol.bundlewriter import BundleWriter
    from ...protocol.settle import settle_bundle

    bundle = Bundle(runs_dir, claim.run_id)
    if bundle.exists():
        try:
            settle_bundle(BundleWriter(bundle, store, claim.token, fsync="node",
                                       lock_timeout=lock_timeout),
                          "run_failed", {"code": code, "message": safe_error_message(message)})
        except BundleLocked:
            give_back(store, runs_dir, claim, code=code,
                      message=f"{message}; its bundle stayed locked, so it was parked:"
                              f" `pi-workflows resume {claim.run_id}` retries it")
            return code
        except PiWorkflowsError as exc:  # corrupt: status shows queue/bundle
            _warn("run {}: its bundle could not record the failure ({})", claim.run_id,
                  exc.code)
        except OSError as exc:
            # The caller (a host's serving loop) must not die of a write it
            # cannot make: the run waits, parked, instead of ending half-recorded.
            if is_disk_full(exc):
                park_disk_full(store, runs_dir, claim, f"its bundle could not record {code}"
                               f" ({message}): {disk_full_line(exc)}")
                return DISK_FULL
            give_back(store, runs_dir, claim, code=code,
                      message=f"{message}; its bundle could not record it"
                              f" ({exc.strerror or type(exc).__name__}), so it was parked:"
                              f" `pi-workflows resume {claim.run_id}` retries it")
            return code
    store.fail(claim.run_id, claim.token, code, message)
    return None
