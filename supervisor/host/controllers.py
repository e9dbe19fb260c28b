"""The host's controller workers: keeping N of them running, and the child-run feed.

Owns ``ControllerWorkers``, the host's one step for controllers: while a
``*.controller.py`` file exists (the directories are scanned every few
seconds, names and mtimes only, nothing imported) keep
``controller_workers`` worker processes (``procs.ctlworkers``) alive,
restart a dead one after a backoff that doubles per crash, restart them all
when the files change (they load the new code), stop them while the host
drains; a crash loop at load (``crash_limit`` workers dead before they got
past loading the files, within ``crash_window_s``: an import that exits the
process) stops the restarts until a controller file changes, with one log
line and the note ``wire.controllers_halted_file`` the CLI shows; read
the run feed so a child run that ended requeues the resource that started
it; and ``interrupt_child``: a child run whose runner
died is marked interrupted and failed, never resumed (new-attempt
semantics, seed 000 decision 3). Reconciles never run in the host's process.
Imports ``protocol``, ``procs``; never the worker package.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from loguru import logger

from ...protocol.clock import now_ms
from ...protocol.controllers.loading import controller_files
from ...protocol.definitions.discovery import workflow_dirs
from ...protocol.errors import NotFound, PiWorkflowsError
from ...protocol.store import Claim, Store
from ...protocol.wire import NUDGE_SIGNAL, controller_booted_file, controllers_halted_file
from ..procs.claims import fail_claimed
from ..procs.ctlworkers import spawn_controller_worker
from ..procs.workers import Proc
from .crashes import CrashBudget

if TYPE_CHECKING:
    from ...protocol.settingspec import SettingsLike

SCAN_EVERY_S = 2.0
MAX_BACKOFF_S = 30.0
STOP_GRACE_S = 5.0

Spawn = Callable[[int], Proc]


@dataclass
class Slot:
    proc: Proc | None = None
    due: float = 0.0
    crashes: int = 0
    stopping_since: float | None = None
    proc_pid: int = 0


class ControllerWorkers:
    def __init__(self, *, store: Store, settings: SettingsLike, project: Path, project_key: str,
                 runner_id: str, config_json: str, monotonic: Callable[[], float],
                 spawn: Spawn | None = None, state_dir: Path | None = None) -> None:
        self.store = store
        self.state_dir = state_dir
        self.load_crashes = CrashBudget(settings.crash_limit, settings.crash_window_s, monotonic)
        self.halted: tuple[tuple[str, float], ...] | None = None  # the files it halted at
        if state_dir is not None:  # an older host's note: this host tries again
            with contextlib.suppress(OSError):
                controllers_halted_file(state_dir).unlink()
        self.count = settings.controller_workers
        self.backoff_s = max(0.1, settings.restart_backoff_s)
        self.dirs = workflow_dirs(settings, project)
        self.monotonic = monotonic
        self.spawn = spawn or (lambda slot: spawn_controller_worker(
            slot, project=project, project_key=project_key, runner_id=runner_id,
            dirs=self.dirs, config_json=config_json))
        self.slots = [Slot() for _ in range(self.count)]
        self.files: tuple[tuple[str, float], ...] = ()
        self._next_scan = 0.0
        self._seq: int | None = None
        self._ctl_seq: int | None = None

    # ---- the host's step -----------------------------------------------------

    def step(self, stopping: bool) -> None:
        now = self.monotonic()
        self._reap(now)
        if now >= self._next_scan:
            self._next_scan = now + SCAN_EVERY_S
            self._scan(now)
        if stopping or not self.files:
            self._stop_all(now)
            return
        self._feed()
        self._nudge()
        if self.halted is not None:
            return
        for index, slot in enumerate(self.slots):
            if slot.proc is None and slot.due <= now:
                try:
                    slot.proc = self.spawn(index)
                except OSError as exc:
                    slot.due = now + self.backoff_s
                    logger.warning("could not start controller worker {}: {}", index, exc)
                    continue
                logger.info("controller worker {} -> pid {}", index, slot.proc.pid)

    def _reap(self, now: float) -> None:
        for index, slot in enumerate(self.slots):
            if slot.proc is None or (code := slot.proc.poll()) is None:
                continue
            stopped = slot.stopping_since is not None
            slot.proc_pid = slot.proc.pid
            slot.proc, slot.stopping_since = None, None
            if code == 0 or stopped:
                slot.due, slot.crashes = now, 0
                continue
            if not self._booted(index, slot.proc_pid):
                self._load_crash(code)
            slot.crashes += 1
            delay = min(MAX_BACKOFF_S, self.backoff_s * 2 ** (slot.crashes - 1))
            slot.due = now + delay
            logger.warning("controller worker {} exited (status {}); restart in {:.1f} s",
                           index, code, delay)

    def _booted(self, index: int, pid: int) -> bool:
        """Whether the dead worker got past loading the files (True when unknown)."""
        if self.state_dir is None:
            return True
        try:
            return controller_booted_file(self.state_dir, index).read_text().strip() == str(pid)
        except OSError:
            return False

    def _load_crash(self, code: int) -> None:
        """One more worker died loading the files; past the budget, stop restarting."""
        count = self.load_crashes.record("load")
        if not self.load_crashes.spent(count) or self.halted is not None:
            return
        self.halted = self.files
        names = ", ".join(Path(path).name for path, _ in self.files)
        logger.error("controller workers exited {} times while loading the controller files"
                     " (last status {}); not restarted until a controller file changes: {}"
                     " (`pi-workflows controllers` names the file that fails)",
                     count, code, names)
        if self.state_dir is None:
            return
        note = {"files": [path for path, _ in self.files], "crashes": count, "lastExit": code,
                "at": now_ms()}
        with contextlib.suppress(OSError):
            path = controllers_halted_file(self.state_dir)
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as fh:
                fh.write(json.dumps(note, sort_keys=True))
            tmp.replace(path)

    def _resume(self) -> None:
        self.halted = None
        self.load_crashes.forget("load")
        for slot in self.slots:
            slot.crashes, slot.due = 0, 0.0
        if self.state_dir is not None:
            with contextlib.suppress(OSError):
                controllers_halted_file(self.state_dir).unlink()
        logger.info("controller files changed; starting the controller workers again")

    def _scan(self, now: float) -> None:
        found = []
        for f in controller_files(*self.dirs):
            try:
                found.append((str(f.path), f.path.stat().st_mtime))
            except OSError:
                continue
        files = tuple(found)
        if self.halted is not None and files != self.halted:
            self._resume()
        if files != self.files and self.files:
            logger.info("controller files changed; restarting the controller workers")
            self._stop_all(now)
        self.files = files

    def _stop_all(self, now: float) -> None:
        for slot in self.slots:
            if slot.proc is None:
                continue
            if slot.stopping_since is None:
                slot.stopping_since = now
                slot.proc.send(signal.SIGTERM)
            elif now - slot.stopping_since >= STOP_GRACE_S:
                slot.proc.send_group(signal.SIGKILL)

    def _nudge(self) -> None:
        """Something was written to the controller tables (an apply, a delete, a
        ``controller reconcile``; the CLI pokes the host): wake the idle workers."""
        try:
            seq = self.store.last_controller_seq()
        except PiWorkflowsError:
            return
        if self._ctl_seq is not None and seq != self._ctl_seq:
            for slot in self.slots:
                # Also one still booting: it was started with the signal ignored
                # (``procs.ctlworkers``), and claims at once when it is up anyway.
                if slot.proc is not None and slot.stopping_since is None:
                    slot.proc.send(NUDGE_SIGNAL)
        self._ctl_seq = seq

    def _feed(self) -> None:
        """A child run that ended requeues its parent resource now.

        The store queues the parent in the transaction that ends the child;
        this reads the feed behind it (a catch-up, deduplicated by the queue),
        so a parent is requeued even for a child ended by an older store.
        """
        try:
            if self._seq is None:
                self._seq = self.store.last_event_seq()
            for ended in self.store.children_ended_after(self._seq):
                self._seq = ended.seq
                with contextlib.suppress(NotFound):  # the resource was deleted since
                    self.store.enqueue_reconcile(ended.controller, ended.key)
        except PiWorkflowsError as exc:
            logger.warning("controller feed: {}", exc)

    # ---- the end ---------------------------------------------------------------

    def alive(self) -> int:
        return sum(1 for s in self.slots if s.proc is not None)

    def shutdown(self) -> None:
        """Stop every controller worker: TERM, a grace, then KILL; reap them all."""
        for slot in self.slots:
            if slot.proc is not None:
                slot.proc.send(signal.SIGTERM)
        for slot in self.slots:
            if slot.proc is None:
                continue
            try:
                slot.proc.wait(STOP_GRACE_S)
            except Exception:  # it ignored TERM (a reconcile in hand): killed
                slot.proc.send_group(signal.SIGKILL)
                try:
                    slot.proc.wait(5)
                except Exception as exc:
                    logger.warning("controller worker {} did not exit: {}", slot.proc.pid, exc)
            slot.proc = None


INTERRUPTED = "interrupted"


def interrupt_child(store: Store, runs_dir: Path, claim: Claim, why: str, *,
                    lock_timeout: float) -> bool:
    """A controller's child run whose runner died is not resumed: True if ``claim``'s
    run is one, now marked ``interrupted`` (its parent reconciles again and starts
    a new attempt) and failed with code ``interrupted``; False for any other run.

    The record first: a host killed between the two finds the run again at its
    takeover, and the mark is a no-op the second time.
    """
    if store.child_by_run(claim.run_id) is None:
        return False
    store.mark_child_interrupted(claim.run_id, why)
    fail_claimed(store, runs_dir, claim, INTERRUPTED,
                 f"{why}; a controller's child run is not resumed: its controller starts a"
                 " new attempt", lock_timeout=lock_timeout)
    logger.info("child run {} interrupted ({}); its controller starts a new attempt",
                claim.run_id, why)
    return True
