"""The host's supervisor loop: one worker subprocess per claimed run.

Owns ``Host``: ``loop_once`` is one short pass (heartbeat -> take over dead
runners -> reap children -> stop hung workers -> renew held claims ->
restart crashed ones -> answer due human decisions (``deadlines``) -> claim
up to the concurrency limit, unless the
runs directory's disk is full: ``diskgate`` -> keep the controller workers:
``controllers``) so tests drive
it without threads; ``start`` is start-up (lock, register, reap orphans,
take over dead runners), ``shutdown`` the end; ``host.serve`` adds signals
and the wait. Time and the OS (``OsLayer``) come in from outside. Imports
``protocol``, ``procs`` and the host wing; starts the worker only as a
subprocess, never imports it.
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from loguru import logger

from ...protocol.agentenv import provider_env_names, resolve_agent_dir
from ...protocol.bundle import Bundle
from ...protocol.clock import Clock, now_ms
from ...protocol.diskfull import DISK_FULL
from ...protocol.errors import ClaimLost, PiWorkflowsError, StoreTransientError, TransitionRefused
from ...protocol.liveness import host_name, process_start_time
from ...protocol.paths import Paths, project_key
from ...protocol.retry import with_retries
from ...protocol.states import QueueState
from ...protocol.store import Claim, Gone, RunnerRow, Store, open_store
from ...protocol.throttle import Throttle, held_note
from ...protocol.titles import host_title, set_title
from ...protocol.wire import PARK_MARGIN_S, ForkRequest, WorkerExit, marker_value
from ...protocol.workerconfig import WorkerConfig
from ..procs.claims import (
    after_exit,
    fail_claimed,
    give_back,
    lock_blockers,
    park_disk_full,
    park_locked,
)
from ..procs.oslayer import OsLayer, RealOs
from ..procs.workers import Phase, WorkerHandle
from ..procs.zygote import ForkUncertain, ZygoteKeeper
from ..views.holds import chat_hold, hold_text, is_chat_runner
from .controllers import ControllerWorkers, interrupt_child
from .crashes import CrashBudget
from .deadlines import Deadlines
from .diskgate import DiskGate
from .lock import HostLock
from .takeover import runners

if TYPE_CHECKING:
    from ...protocol.settingspec import SettingsLike

Monotonic = Callable[[], float]
# How often the host heartbeats its runner row and looks for dead runners.
SWEEP_EVERY_S = 5.0
# A worker that could not be spawned (EAGAIN, EMFILE) is tried again after this.
SPAWN_RETRY_S = 1.0
# How long the host itself waits for a run's lock to record a failure in it.
SETTLE_LOCK_S = 2.0


# A full disk or a held lock repeats the same warning many times a second.
STORE_WARNINGS = Throttle()


def _log_retry(attempt: int, exc: StoreTransientError, delay: float) -> None:
    held = STORE_WARNINGS.due(exc.code)
    if held is not None:
        logger.warning("{}; backing off {:.2f} s (retry {}){}", exc, delay, attempt + 1,
                       held_note(held))


def default_concurrency() -> int:
    return max(2, os.cpu_count() or 2)


@dataclass
class Pending:
    """A claim the host holds without a worker: a crash restart or a takeover."""

    claim: Claim
    due: float  # monotonic
    # A worker for it may be running unknown to us (a fork with no answer):
    # whatever carries the run's marker is killed before another starts.
    sweep: bool = False


@dataclass
class StartupReport:
    runner_id: str
    reaped: int
    taken_over: int


class Host:
    def __init__(self, paths: Paths, settings: SettingsLike, *, concurrency: int | None = None,
                 clock: Clock = now_ms, monotonic: Monotonic = time.monotonic,
                 os_layer: OsLayer | None = None, pi_args: tuple[str, ...] = (),
                 use_zygote: bool | None = None) -> None:
        self.paths = paths
        self.settings = settings
        self.concurrency = concurrency or settings.concurrency or default_concurrency()
        self.clock = clock
        self.monotonic = monotonic
        self.os: OsLayer = os_layer or RealOs()
        self.runner_id = f"host-{host_name()}-{os.getpid()}-{secrets.token_hex(3)}"
        self.project_key = project_key(paths.project)
        # Each store call backs off on a busy store for a while; a longer
        # outage reaches serve(), which backs off the whole pass.
        # The store judges other runners' claims on this same monotonic clock.
        self.store: Store = with_retries(open_store(settings, paths.store_file, clock=clock,
                                                    monotonic=monotonic),
                                         deadline_s=5.0, on_retry=_log_retry)
        self.lock = HostLock(paths.host_lock)
        self.workers: dict[str, WorkerHandle] = {}  # the current worker of each run
        self.retiring: list[WorkerHandle] = []  # superseded workers, killed, to be reaped
        self.pending: dict[str, Pending] = {}
        self.crashes = CrashBudget(settings.crash_limit, settings.crash_window_s, monotonic)
        self.stopping = False
        self.quick = False
        self._holds_noted: set[tuple[str, str]] = set()  # (run, chat runner) logged
        # Workers get the resolved settings, so they boot without pydantic.
        self.worker_config = WorkerConfig.from_settings(settings, paths, pi_args).to_json()
        # Workers are forked from a booted zygote (~10 ms) instead of booting a
        # fresh interpreter each (~0.2 s of CPU); cold spawns while it is down.
        self.zygote = ZygoteKeeper(
            lambda: self.os.start_zygote(project=paths.project, project_key=self.project_key,
                                         runner_id=self.runner_id,
                                         config_json=self.worker_config,
                                         spare=settings.zygote_spare),
            monotonic=monotonic,
            enabled=(settings.zygote and settings.standby) if use_zygote is None else use_zygote)
        self._next_sweep = 0.0
        # On the host's monotonic clock, so tests drive the window too.
        self.spawn_warnings = Throttle(monotonic=monotonic)
        # Closed while the runs directory's filesystem is full: no run is claimed.
        self.disk = DiskGate(paths.runs_dir, monotonic)
        # Human decisions' on_timeout deadlines: answered by the host when due.
        self.deadlines = Deadlines(self.store, paths.runs_dir, wall_ms=clock)
        # Reconciles run in controller worker processes of their own, never here.
        self.controllers = ControllerWorkers(
            store=self.store, settings=settings, project=paths.project,
            project_key=self.project_key, runner_id=self.runner_id,
            config_json=self.worker_config, monotonic=monotonic,
            state_dir=paths.state_dir)

    # ---- start-up --------------------------------------------------------

    def start(self) -> StartupReport:
        """Lock, register, start the zygote, reap orphans, take over dead runners."""
        # What `run --detach` compares with its caller's (protocol.agentenv): names only.
        self.lock.acquire(self.runner_id, {
            "agentDir": resolve_agent_dir(self.settings.pi_agent_dir),
            "providerEnv": provider_env_names(os.environ)})
        self.store.register_runner(self.runner_id, "host", os.getpid(), process_start_time(),
                                   host_name())
        self.zygote.keep()  # it boots (a few hundred ms) while orphans are reaped
        live, dead = runners(self.store, self.runner_id)
        reaped = self.os.kill(self.os.orphans(self.paths.runs_dir, self.project_key, live))
        self.os.sweep_tempdirs()  # what the dead runners' killed workers left in the temp dir
        taken = self._take_over(dead)
        self._note_holds()
        self._release_disk_full()  # parked by an earlier host while the disk was full
        self.deadlines.start()
        self._next_sweep = self.monotonic() + SWEEP_EVERY_S
        return StartupReport(self.runner_id, reaped, taken)

    # ---- one pass ----------------------------------------------------------

    def loop_once(self) -> None:
        now = self.monotonic()
        if now >= self._next_sweep:
            self._next_sweep = now + SWEEP_EVERY_S
            self.store.heartbeat(self.runner_id)
            self._take_over_dead_runners()
            # Any dead worker's (an attached run's too): only provably dead owners' go.
            self.os.sweep_tempdirs()
            self._note_holds()
            if not self.disk.full:
                self._release_disk_full()  # parked so by another runner, say
        self._reap()
        self._stop_hung()
        self._renew_pending()
        if self.disk.reopened():
            self._release_disk_full()
        if not self.stopping:
            self.zygote.keep()
            self._start_pending()
            self.deadlines.step()  # a continuation it queues is claimed just below
            if not self.disk.full:
                self._claim()
        self.controllers.step(self.stopping)
        self._set_title()

    def _note_holds(self) -> None:
        """Say once per hold why a parked run is not resumed: `chat` holds it."""
        seen = set()
        for row in self.store.list_runs(QueueState.STARTING.value):
            if not is_chat_runner(row.runner_id):
                continue
            key = (row.run_id, str(row.runner_id))
            seen.add(key)
            if key not in self._holds_noted and (hold := chat_hold(self.store, row)):
                logger.info("run {} waits: {}", row.run_id, hold_text(hold))
        self._holds_noted = seen

    def _release_disk_full(self) -> None:
        if not self.stopping:
            self.disk.release(self.store)

    def _disk_full(self, claim: Claim, why: str) -> None:
        """The runs directory is full: park the run blocked and close the gate."""
        park_disk_full(self.store, self.paths.runs_dir, claim, why)
        self.disk.trip(f"run {claim.run_id}: {why}")

    def _take_over(self, dead: list[RunnerRow]) -> int:
        taken = 0
        for row in dead:  # each claim is tracked as soon as it is ours
            # Its controller workers' reconcile claims go back to the queue at once.
            released = self.store.release_reconciles(Gone(row.runner_id, row.pid,
                                                          row.pid_start_time))
            if released:
                logger.info("requeued {} reconcile(s) of dead runner {}", released,
                            row.runner_id)
            for claim in self.store.take_over_runner(row, self.runner_id):
                taken += 1
                if interrupt_child(self.store, self.paths.runs_dir, claim,
                                   f"its runner {row.runner_id} died",
                                   lock_timeout=SETTLE_LOCK_S):
                    continue
                self.pending[claim.run_id] = Pending(claim, self.monotonic())
        return taken

    def _take_over_dead_runners(self) -> None:
        """Free the runs of runners that died since start-up, without waiting for leases.

        A terminal session that was killed (with its worker unable to park)
        leaves claims behind; proof of death frees them, once its processes
        are gone.
        """
        if self.stopping:
            return
        _, dead = runners(self.store, self.runner_id)
        for row in dead:
            self.os.kill(self.os.run_processes(self.project_key, row.runner_id))
        if dead and (taken := self._take_over(dead)):
            logger.warning("took over {} run(s) of dead runner(s) {}", taken,
                           ", ".join(r.runner_id for r in dead))

    def request_stop(self) -> None:
        """First call: graceful drain. Second: quick shutdown."""
        if self.stopping:
            self.quick = True
            return
        self.stopping = True
        now = self.monotonic()
        for handle in self.workers.values():
            handle.terminate(now)  # the worker parks its run and exits

    def _reap(self) -> None:
        now = self.monotonic()
        for handle in list(self.retiring):
            if handle.poll() is not None:
                handle.change(Phase.EXITED, now)
                self.retiring.remove(handle)
        for run_id, handle in list(self.workers.items()):
            code = handle.poll()
            if code is None:
                continue
            del self.workers[run_id]
            handle.change(Phase.EXITED, now)
            try:
                self._exited(handle, code)
            except (ClaimLost, TransitionRefused) as exc:
                logger.info("worker for {} exited {}; its claim is gone ({})", run_id, code, exc)

    def _exited(self, handle: WorkerHandle, code: int) -> None:
        run_id, claim = handle.run_id, handle.claim
        if not after_exit(self.store, self.os, self.project_key, claim, code):
            logger.info("worker for {} exited ({})", run_id, WorkerExit(code).name.lower())
            self.crashes.forget(run_id)
            return
        if self.stopping:
            give_back(self.store, self.paths.runs_dir, claim)  # no restarts while draining
            return
        row = self.store.verify(run_id, claim.token)
        if code == WorkerExit.DISK_FULL:
            # Not a crash: it could not write for want of space. Waited out,
            # without spending the crash budget (its earlier count stands).
            self._disk_full(claim, "the runs directory's filesystem is full (the worker"
                                   " could not write the run's bundle)")
            return
        if code == WorkerExit.BOOT_ERROR:
            self._fail_settled(claim, "worker_boot_error",
                               "the worker could not start; see the host log")
            return
        if code == WorkerExit.BUNDLE_LOCKED:
            stale, holders = lock_blockers(self.os, self.paths.runs_dir, self.project_key,
                                           self.runner_id, run_id)
            if stale:
                # Not this worker's crash: a void claim's writer held the lock.
                self.os.kill(stale)
                logger.warning("run {}: killed {} stale writer(s) holding its lock", run_id,
                               len(stale))
                self.pending[run_id] = Pending(self._restart_claim(claim, row.state),
                                               self.monotonic())
                return
            if holders and Bundle(self.paths.runs_dir, run_id).exists():
                # Held by something named that is no worker of this run: not a
                # crash, and not ours to kill. The run waits, parked, for a person.
                # Nobody named (the holder let go meanwhile): a crash like any other.
                self.crashes.forget(run_id)
                who = park_locked(self.store, self.paths.runs_dir, claim, holders)
                logger.warning("run {}: parked, its bundle is locked by {}", run_id, who)
                return
        if interrupt_child(self.store, self.paths.runs_dir, claim,
                           f"its worker crashed (status {code})", lock_timeout=SETTLE_LOCK_S):
            self.crashes.forget(run_id)
            return
        crashes = self.crashes.record(run_id)

        window = self.settings.crash_window_s
        if self.crashes.spent(crashes):
            self.crashes.forget(run_id)
            self._fail_settled(claim, "worker_crash_loop",
                               f"the worker crashed {crashes} times within {window:g} s"
                               f" (last exit status {code}); the run was stopped")
            logger.warning("run {} failed: worker crash loop", run_id)
            return
        delay = self.settings.restart_backoff_s * (2 ** (crashes - 1))
        self.pending[run_id] = Pending(self._restart_claim(claim, row.state),
                                       self.monotonic() + delay)
        logger.warning("worker for {} crashed (status {}); restart in {:.1f} s", run_id, code,
                       delay)

    @staticmethod
    def _restart_claim(claim: Claim, state: QueueState) -> Claim:
        return Claim(claim.run_id, claim.runner_id, claim.token, claim.lease_expires_at, state,
                     state)

    def _fail_settled(self, claim: Claim, code: str, message: str) -> None:
        parked = fail_claimed(self.store, self.paths.runs_dir, claim, code, message,
                              lock_timeout=SETTLE_LOCK_S)
        if parked == DISK_FULL:
            self.disk.trip(f"run {claim.run_id}: its bundle could not record {code}")

    def _stop_hung(self) -> None:
        # Monotonic only: the wall clock may step (NTP, a VM resume) either way.
        now, lease_s = self.monotonic(), self.settings.lease_ms / 1000
        hung: list[Claim] = []
        for handle in self.workers.values():
            if handle.phase in (Phase.KILLED, Phase.RETIRING):
                continue  # to be reaped
            if handle.phase == Phase.STOPPING:
                grace = (self.settings.drain_grace_s + PARK_MARGIN_S if self.stopping
                         else self.settings.hung_kill_after_s)
                if now - handle.since >= grace or self.quick:
                    handle.kill(now)
                continue
            row = self.store.get(handle.run_id)
            if row is not None and row.claim_token is None:
                # The worker settled or parked the run itself and is exiting;
                # only a worker that lingers after that is stopped.
                if handle.phase != Phase.LINGERING:
                    handle.change(Phase.LINGERING, now)
                elif now - handle.since >= self.settings.hung_kill_after_s:
                    handle.terminate(now)
            elif row is None or row.claim_token != handle.claim.token:
                handle.terminate(now)  # another runner owns the run now
            elif handle.stalled_for(row.lease_expires_at, now) >= lease_s:
                # No renewal for a whole lease of the host's monotonic time (the
                # wall clock plays no part: a step either way changes nothing
                # here). The store fences by token alone, so the claim is
                # rotated first (the worker's next write is refused), then the
                # worker is killed with no graceful step and the run restarted.
                logger.warning("worker for {} stopped renewing its lease; killing it",
                               handle.run_id)
                fresh = self._fence_out(handle)
                self._kill_run(handle)
                if fresh is not None:
                    hung.append(fresh)
            elif handle.phase == Phase.STARTING and row.state == QueueState.RUNNING:
                handle.change(Phase.RUNNING, now)
        for claim in hung:
            if self._interrupt_hung(claim):
                continue
            self._spawn(claim)  # retires the killed worker, counts it as a crash

    def _interrupt_hung(self, claim: Claim) -> bool:
        """A controller's child run whose worker hung is not resumed (new-attempt
        semantics, seed 000 decision 3), as after a crash: its killed worker is
        retired, the run marked interrupted and failed. False for any other run."""
        if self.store.child_by_run(claim.run_id) is None:
            return False
        old = self.workers.pop(claim.run_id, None)
        if old is not None:
            self._kill_run(old, retire=True)
            self.retiring.append(old)
        return interrupt_child(self.store, self.paths.runs_dir, claim,
                               "its worker stopped renewing its lease (hung or stopped)",
                               lock_timeout=SETTLE_LOCK_S)

    def _fence_out(self, handle: WorkerHandle) -> Claim | None:
        """The hung worker's claim under a new token, so it can write nothing more.

        None while draining (the reaped worker's claim is given back as in
        any drain) or when the claim is no longer ours.
        """
        if self.stopping:
            return None
        try:
            return self.store.rotate(handle.run_id, handle.claim.token)
        except ClaimLost:
            return None

    def _renew_pending(self) -> None:
        for run_id, pending in list(self.pending.items()):
            try:
                self.store.renew(run_id, pending.claim.token)
            except ClaimLost:
                del self.pending[run_id]

    def _start_pending(self) -> None:
        now = self.monotonic()
        for run_id, pending in sorted(self.pending.items(), key=lambda kv: kv[1].due):
            if len(self.workers) >= self.concurrency or pending.due > now:
                continue
            del self.pending[run_id]
            try:
                row = self.store.verify(run_id, pending.claim.token)
            except ClaimLost:
                continue
            claim = Claim(run_id, self.runner_id, pending.claim.token,
                          row.lease_expires_at or 0, row.state, row.state)
            if pending.sweep:
                # A worker we never heard of holds the old token: a new one fences
                # it out of every write, and its marker finds it to be killed.
                try:
                    claim = self.store.rotate(run_id, claim.token)
                except ClaimLost:
                    continue
                self.os.kill(self.os.run_processes(self.project_key, self.runner_id, run_id))
            self._spawn(claim)

    def _claim(self) -> None:
        if len(self.workers) + len(self.pending) >= self.concurrency:
            # Not claiming, still watching: a claim that stalls meanwhile is due
            # a lease after its last renewal, not a lease after a slot frees.
            self.store.watch_claims()
            return
        while len(self.workers) + len(self.pending) < self.concurrency:
            # Runs with a worker of ours are judged by _stop_hung, never taken
            # back by claim_next (which would kill that worker as superseded).
            keep = tuple(r for r, h in self.workers.items() if h.phase != Phase.KILLED)
            claim = self.store.claim_next(self.runner_id, keep=keep)
            if claim is None:
                return
            self._spawn(claim)

    def _spawn(self, claim: Claim) -> None:
        now = self.monotonic()
        old = self.workers.pop(claim.run_id, None)
        if old is not None:
            # We just re-claimed our own hung worker's run: the old one can no
            # longer write; kill it (freeing any lock it holds) and its children.
            self._kill_run(old, retire=True)
            self.retiring.append(old)
            # A worker that keeps hanging is a crash loop too, not a kill forever.
            crashes = self.crashes.record(claim.run_id)
            if self.crashes.spent(crashes):
                self.crashes.forget(claim.run_id)
                self._fail_settled(claim, "worker_crash_loop",
                                   f"the worker stopped renewing its lease {crashes} times"
                                   f" within {self.settings.crash_window_s:g} s; the run was"
                                   " stopped")
                logger.warning("run {} failed: its worker kept hanging", claim.run_id)
                return
        try:
            forked = self.zygote.fork(self._fork_request(claim))
            handle = WorkerHandle(claim, forked, now) if forked is not None else \
                self.os.spawn_worker(claim, project=self.paths.project,
                                     project_key=self.project_key, runner_id=self.runner_id,
                                     config_json=self.worker_config, now=now)
        except OSError as exc:  # fork failed (EAGAIN, EMFILE): try again shortly
            # Retried every SPAWN_RETRY_S for each run: said once per errno a minute.
            held = self.spawn_warnings.due(f"spawn:{exc.errno}")
            if held is not None:
                logger.warning("could not start a worker for {}: {}{}", claim.run_id, exc,
                               held_note(held))
            # An unanswered fork may have started one: by the retry it carries the
            # run's marker (its first act), and is killed before another starts.
            self.pending[claim.run_id] = Pending(claim, now + SPAWN_RETRY_S,
                                                 sweep=isinstance(exc, ForkUncertain))
            return
        self.workers[claim.run_id] = handle
        logger.info("run {} -> worker pid {}", claim.run_id, handle.pid)

    def _fork_request(self, claim: Claim) -> ForkRequest:
        return ForkRequest(claim.run_id, claim.state, claim.token,
                           marker_value(self.project_key, self.runner_id, claim.run_id),
                           self.worker_config, os.getpid())

    def wake_fds(self) -> list[int]:
        """Descriptors whose readiness means a pass is due (the zygote's exit reports)."""
        return self.zygote.fds()

    def _kill_run(self, handle: WorkerHandle, *, retire: bool = False) -> None:
        """SIGKILL a worker's group and every process still carrying its run's marker."""
        handle.kill(self.monotonic(), retire=retire)
        self.os.kill(self.os.run_processes(self.project_key, self.runner_id, handle.run_id))

    def _set_title(self) -> None:
        set_title(host_title(self.project_key, len(self.workers)))

    def next_timeout(self) -> float:
        """The longest the serving loop may wait before the next pass."""
        timeout = self.settings.poll_interval_s
        now = self.monotonic()
        for pending in self.pending.values():
            timeout = min(timeout, max(0.0, pending.due - now))
        due = self.deadlines.next_due_s()
        if due is not None:
            timeout = min(timeout, due)
        timeout = self.disk.timeout(timeout)
        if self.stopping:
            timeout = min(timeout, 0.1)
        return timeout

    def shutdown(self) -> None:
        """Kill what is left, park the rows still held, release everything."""
        now = self.monotonic()
        self.controllers.shutdown()
        for handle in self.workers.values():
            handle.kill(now)
        for handle in self.workers.values():
            try:
                handle.proc.wait(5)
            except Exception as exc:  # a child that will not die must not stop shutdown
                logger.warning("worker {} did not exit: {}", handle.pid, exc)
        self.zygote.stop()  # after the waits: it reports its workers' exits
        self.os.kill(self.os.run_processes(self.project_key, self.runner_id))
        held = [h.claim for h in self.workers.values()] + [p.claim for p in self.pending.values()]
        for claim in held:
            give_back(self.store, self.paths.runs_dir, claim)
        self.workers.clear()
        self.pending.clear()
        try:
            self.store.unregister_runner(self.runner_id)
        except PiWorkflowsError as exc:
            logger.warning("could not unregister the host runner: {}", exc)
        self.lock.release()
        self.store.close()
