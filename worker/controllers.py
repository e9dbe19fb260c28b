"""A controller worker process: claims reconciles and runs them, one at a time.

Owns the ``--controllers SLOT`` role of ``python -m pi_workflows.worker``:
load the project's controller files (each within the load bound; a broken
file is logged and skipped), then loop: claim the next due reconcile of one
of those controllers, run ``reconcile(ctx, resource)`` under a renewer that
renews the work lease at a third of it and, past the controller's timeout,
sets ``ctx.cancelled()``, then after a grace requeues the key by token and
ends the process (a reconcile that ignores its cancel is abandoned; a kill
-9 instead leaves the lease to expire). The outcome, the status patch
merged, is written by token. The title names the controller and key while a
reconcile runs. Imports ``protocol`` and ``worker.process`` (boot helpers)
and ``worker.ctlport``; must not import ``supervisor``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
import time
import traceback
from pathlib import Path

from ..protocol.clock import now_ms
from ..protocol.controllers.context import ReconcileContext
from ..protocol.controllers.define import resource_view
from ..protocol.controllers.loading import LoadedController, load_active_in
from ..protocol.errors import ClaimLost, PiWorkflowsError, StoreTransientError, UsageError
from ..protocol.limits import safe_error_message
from ..protocol.paths import project_key
from ..protocol.retry import with_retries
from ..protocol.store import Store
from ..protocol.store.controllers import (
    ReconcileClaim,
    Resource,
    error,
    requeue,
    requeue_after,
    settled,
)
from ..protocol.titles import controller_title, set_title
from ..protocol.wire import NUDGE_SIGNAL, WorkerExit, controller_booted_file
from ..protocol.workerconfig import WorkerConfig
from .ctlport import ClaimedPort
from .process import die_with_parent, load_config, open_worker_store

# The longest an idle worker waits before it looks at the queue again (a stalled
# claim to take over); a nudge from the host or the next due time ends it sooner.
IDLE_WAIT_S = 1.0
# A reconcile past its timeout gets this long (at most) to notice its cancel.
CANCEL_GRACE_S = 2.0
TIMED_OUT_EXIT = 25


class Stop:
    """SIGTERM/SIGINT: finish the reconcile in hand, claim no more. The host's nudge
    (``NUDGE_SIGNAL``: a resource was applied, deleted or queued) ends an idle wait."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.nudge = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._stop)
        signal.signal(NUDGE_SIGNAL, lambda *_: self.nudge.set())

    def _stop(self, _signum: int, _frame: object) -> None:
        self.event.set()
        self.nudge.set()

    def idle(self, store: Store, names: list[str]) -> None:
        """Wait for a nudge, the next key's due time, or ``IDLE_WAIT_S`` at most."""
        wait = IDLE_WAIT_S
        with contextlib.suppress(PiWorkflowsError):
            due = store.next_reconcile_due(names) if names else None
            if due is not None:
                wait = min(wait, max(0.0, (due - now_ms()) / 1000))
        self.nudge.wait(wait)
        self.nudge.clear()


class Watchdog(threading.Thread):
    """Renews one work claim at a third of its lease; ends a reconcile past its timeout."""

    def __init__(self, cfg: WorkerConfig, claim: ReconcileClaim, timeout_s: float,
                 cancel: threading.Event) -> None:
        super().__init__(daemon=True, name="reconcile-watchdog")
        self.cfg, self.claim, self.timeout_s, self.cancel = cfg, claim, timeout_s, cancel
        self.every_s = max(0.05, claim.lease_ms / 3000)
        self.done = threading.Event()
        self.lost = False

    def run(self) -> None:
        store = open_worker_store(self.cfg)  # its own connection: the reconcile has the other
        started = time.monotonic()
        try:
            while not self.done.wait(self.every_s):
                elapsed = time.monotonic() - started
                try:
                    store.renew_reconcile(self.claim.token)
                except ClaimLost:
                    self.lost = True
                    self.cancel.set()
                    return
                except PiWorkflowsError as exc:  # a busy store: the next renewal tries again
                    sys.stderr.write(f"pi-workflows controller: renew failed: {exc}\n")
                if elapsed >= self.timeout_s:
                    self.cancel.set()
                if elapsed >= self.timeout_s + min(CANCEL_GRACE_S, self.timeout_s):
                    self._abandon(store)
        finally:
            store.close()

    def _abandon(self, store: Store) -> None:
        """Requeue the key (with backoff) under our token, then end the process."""
        with contextlib.suppress(PiWorkflowsError):
            store.finish_reconcile(self.claim.token, error(
                f"the reconcile ran past its timeout ({self.timeout_s:g} s) and was abandoned"))
        os._exit(TIMED_OUT_EXIT)


def _dirs(args: argparse.Namespace) -> tuple[Path, Path]:
    project = Path(args.project)
    local = Path(args.workflows_dir) if args.workflows_dir else project / ".pi" / "workflows"
    shared = Path(args.global_dir) if args.global_dir else Path("~/.pi/agent/workflows")
    return local.expanduser(), shared.expanduser()


def _with_finalizer(store: Store, claim: ReconcileClaim, row: Resource) -> Resource | None:
    """The resource holding this controller's finalizer (added before the first
    reconcile, so a delete waits for its cleanup); None if the write lost a race."""
    if row.deletion_requested or claim.controller in row.finalizers:
        return row
    out = store.add_finalizer(claim.controller, claim.key, claim.controller,
                              row.resource_version, token=claim.token)
    return out if isinstance(out, Resource) else None


def reconcile_one(store: Store, cfg: WorkerConfig, claim: ReconcileClaim,
                  loaded: LoadedController, dirs: tuple[Path, Path]) -> str:
    """Run one claimed reconcile to its written outcome; returns the outcome's kind."""
    row = claim.resource
    if row is not None:
        row = _with_finalizer(store, claim, row)
        if row is None:  # the row moved under us: the store queued the key again
            return store.finish_reconcile(claim.token, requeue()).outcome
    if row is None:
        return store.finish_reconcile(claim.token, settled()).outcome
    resource = resource_view(row.metadata(), row.spec, row.status)
    port = ClaimedPort(store, controller=claim.controller, key=claim.key, token=claim.token,
                       dirs=dirs)
    ctx = ReconcileContext(port, resource)
    dog = Watchdog(cfg, claim, loaded.controller.timeout, ctx.cancel_event)
    dog.start()
    problem: str | None = None
    try:
        loaded.controller.reconcile(ctx, resource)
        if ctx.outcome is None:
            problem = ("reconcile returned without ending: call ctx.settled(),"
                       " ctx.requeue() or ctx.requeue_after()")
    except ClaimLost:
        return "lost"
    except Exception as exc:
        problem = safe_error_message(f"{type(exc).__name__}: {exc}")
        if os.environ.get("PI_WORKFLOWS_DEBUG") == "1":
            traceback.print_exc()
    finally:
        dog.done.set()
        dog.join()
    if dog.lost:
        return "lost"
    if problem is not None:
        return store.finish_reconcile(claim.token, error(problem)).outcome
    outcome = ctx.outcome
    assert outcome is not None
    version = row.resource_version
    if ctx.finalizer_removed:
        gone = store.remove_finalizer(claim.controller, claim.key, claim.controller, version,
                                      token=claim.token)
        if not isinstance(gone, Resource):  # deleted, or lost a race (queued again)
            return store.finish_reconcile(claim.token, settled()).outcome
        version = gone.resource_version
    try:
        done = store.finish_reconcile(claim.token, _STORE_OUTCOME[outcome.kind](outcome),
                                      expected_version=version, status_patch=dict(outcome.patch))
    except UsageError as exc:  # the patch broke a store bound (a reason too long, 256 KiB)
        done = store.finish_reconcile(claim.token, error(f"the status patch was refused: {exc}"))
    return done.outcome


_STORE_OUTCOME = {"settled": lambda o: settled(), "requeue": lambda o: requeue(),
                  "requeue_after": lambda o: requeue_after(o.after_s)}


_TITLE: list[str] = [""]


def _title(text: str) -> None:
    if _TITLE[0] != text:  # the idle loop sets it many times a second
        _TITLE[0] = text
        set_title(text)


def _booted(cfg: WorkerConfig, slot: int) -> None:
    """Tell the host this worker got past loading the controller files (its pid)."""
    path = controller_booted_file(cfg.paths.state_dir, slot)
    with contextlib.suppress(OSError):
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # product files: 0600
        with os.fdopen(fd, "w") as fh:
            fh.write(str(os.getpid()))


def serve_controllers(args: argparse.Namespace) -> int:
    """The controller worker's life: boot, load, claim and reconcile until stopped."""
    key, slot = project_key(Path(args.project)), int(args.controllers)
    set_title(controller_title(key, slot, "booting"))
    die_with_parent()
    stop = Stop()
    parent = args.parent_pid if args.parent_pid is not None else os.getppid()
    try:
        cfg = load_config(args.project)
        # A busy store backs off and retries (for up to a lease) on every call.
        store = with_retries(open_worker_store(cfg), deadline_s=cfg.lease_ms / 1000)
    except (PiWorkflowsError, OSError) as exc:
        sys.stderr.write(f"pi-workflows controller: boot error: {exc}\n")
        return WorkerExit.BOOT_ERROR
    dirs = _dirs(args)
    loaded, errors = load_active_in(*dirs)
    for name, err in errors.items():
        sys.stderr.write(f"pi-workflows controller: {name}: {err.reason}\n")
    _booted(cfg, slot)
    names = sorted(loaded)
    owner = args.runner  # the host's: its death (proven) returns the keys at once
    while not stop.event.is_set() and os.getppid() == parent:
        _title(controller_title(key, slot, "idle"))
        try:
            claim = store.claim_reconcile(names, owner, cfg.lease_ms) if names else None
        except StoreTransientError as exc:
            sys.stderr.write(f"pi-workflows controller: store busy: {exc}\n")
            claim = None
        if claim is None:
            stop.idle(store, names)
            continue
        _title(controller_title(key, slot, f"{claim.controller}/{claim.key}"))
        try:
            reconcile_one(store, cfg, claim, loaded[claim.controller], dirs)
        except ClaimLost:
            continue
        except StoreTransientError as exc:  # busy past a lease: the lease returns the key
            sys.stderr.write(f"pi-workflows controller: store busy: {exc}\n")
            stop.event.wait(IDLE_WAIT_S)
        except PiWorkflowsError as exc:  # the store refused a write (a status over its bound)
            sys.stderr.write(f"pi-workflows controller: {claim.controller}/{claim.key}: {exc}\n")
            with contextlib.suppress(PiWorkflowsError):
                store.finish_reconcile(claim.token, error(f"the store refused a write: {exc}"))
    store.close()
    return WorkerExit.FINISHED
