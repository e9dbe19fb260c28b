"""The worker process: boot, signals, lease renewal, parent watch, exit codes.

Owns everything about being the one subprocess that executes one claimed
run: the process title, ``PR_SET_PDEATHSIG``, recording its pid in the
bundle before any work, renewing its own lease (and stopping at once when
the claim is lost), turning TERM into a park, and the documented exit code.
Signal handlers only write to a wakeup pipe. Imports ``protocol`` (settings
and logging only lazily, off the boot path) and the worker's control, engine
and runner.
"""

from __future__ import annotations

import argparse
import ctypes
import errno
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from ..protocol.bundle import Bundle, BundleCorrupt
from ..protocol.bundlewriter import BundleWriter
from ..protocol.diskfull import disk_full_line, is_disk_full
from ..protocol.errors import ClaimLost, PiWorkflowsError, StoreTransientError
from ..protocol.paths import Paths, project_key
from ..protocol.processes import child_record, self_record, with_entry
from ..protocol.retry import retry_store, with_retries
from ..protocol.states import QueueState
from ..protocol.store import Claim, Store
from ..protocol.throttle import Throttle, held_note
from ..protocol.titles import set_title, worker_title
from ..protocol.wire import (
    CONFIG_ENV,
    NUDGE_SIGNAL,
    TOKEN_ENV,
    WorkerExit,
)
from ..protocol.workerconfig import WorkerConfig
from .control import Control
from .engine import PARKED, Engine
from .runner import execute_claim, fail_unwritable
from .stream import OutputStreams

if TYPE_CHECKING:  # Pi support is imported with the first agent run, not at boot
    from .agent import AgentExecutor, AgentHooks, AgentRequest, AgentResult
    from .pi_executor import PiExecutor

PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int = signal.SIGTERM) -> None:
    """Ask Linux to send ``sig`` when the parent (its spawning thread) goes away."""
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)


def _watch_signals(control: Control, nudge: threading.Event, read_fd: int) -> None:
    """Turn recorded signals into requests, outside the signal handler."""
    while True:
        try:
            data = os.read(read_fd, 64)
        except InterruptedError:
            continue
        if not data:
            return
        if any(signum != NUDGE_SIGNAL for signum in data):
            control.request_park()
        if NUDGE_SIGNAL in data:
            nudge.set()


def install_signals(control: Control, nudge: threading.Event) -> None:
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, NUDGE_SIGNAL):
        signal.signal(sig, lambda *_: None)  # the wakeup fd records it; nothing else here
    threading.Thread(target=_watch_signals, args=(control, nudge, read_fd), daemon=True,
                     name="pi-workflows-signals").start()


class ParentWatch:
    """Whether the supervisor died: the parent pid changes, or the host's pidfd fires.

    A cold worker is the host's child (re-parenting means the host died); a
    forked one is the zygote's, so it watches the host through a pidfd the
    zygote opened while the host was its parent.
    """

    def __init__(self, parent: int, host_pidfd: int | None = None) -> None:
        self.parent = parent
        self.pidfd = host_pidfd

    def gone(self, timeout: float = 0.0) -> bool:
        if self.pidfd is None:
            if timeout:
                time.sleep(timeout)
            return os.getppid() != self.parent
        poller = select.poll()
        poller.register(self.pidfd, select.POLLIN)
        return bool(poller.poll(int(timeout * 1000)))


def _watch_parent(control: Control, watch: ParentWatch, stop: threading.Event) -> None:
    # Portable backstop for PDEATHSIG, and the only watch a forked worker has.
    while not stop.is_set():
        if watch.gone(0.5):
            control.request_park()
            return


def open_worker_store(cfg: WorkerConfig) -> Store:
    return Store(cfg.paths.store_file, lease_ms=cfg.lease_ms, busy_timeout_ms=cfg.busy_timeout_ms,
                 synchronous=cfg.sqlite_synchronous, url=cfg.store_url)


# A flood of nudges must not turn renewals into a busy loop on the store.
MIN_NUDGE_INTERVAL_S = 0.05


def _renew(settings: WorkerConfig, claim: Claim, control: Control,
           lost: threading.Event, stop: threading.Event, nudge: threading.Event) -> None:
    # Its own connection, opened at the first renewal rather than at boot,
    # where it would compete with the run's first writes on the hot path.
    store: Store | None = None
    deadline_s = max(0.5, (settings.lease_ms - settings.renew_ms) / 1000)
    try:
        while True:
            if nudge.wait(settings.renew_ms / 1000):
                nudge.clear()
                stop.wait(MIN_NUDGE_INTERVAL_S)
            if stop.is_set():
                return
            try:
                if store is None:
                    store = retry_store(lambda: open_worker_store(settings),
                                        deadline_s=deadline_s)
                renewal = retry_store(partial(store.renew, claim.run_id, claim.token),
                                      deadline_s=deadline_s)
            except (ClaimLost, PiWorkflowsError):
                # Lost, or cannot renew: stop now rather than write on a lapsing lease.
                lost.set()
                control.request_park()
                return
            if renewal.cancel_requested:
                control.request_cancel()
            # Both ways: `resume` before the boundary withdraws the request.
            if renewal.pause_requested:
                control.request_pause()
            else:
                control.request_unpause()
    finally:
        if store is not None:
            store.close()


class _LazyLog:
    """Warnings only; loguru is imported on first use (it costs ~80 ms of a boot)."""

    def __init__(self) -> None:
        self.config: WorkerConfig | None = None
        self._ready = False

    def warn(self, message: str) -> None:
        from loguru import logger

        from ..protocol.logsetup import setup_logging

        if not self._ready and self.config is not None:
            setup_logging(self.config.paths.log_dir, level=self.config.log_level, role="worker")
            self._ready = True
        logger.warning(message)


_LOG = _LazyLog()


_STORE_WARNINGS = Throttle()


def _log_retry(attempt: int, exc: StoreTransientError, delay: float) -> None:
    held = _STORE_WARNINGS.due(exc.code)
    if held is not None:
        _LOG.warn(f"{exc}; retry {attempt + 1} in {delay:.2f} s{held_note(held)}")


def load_config(project: str) -> WorkerConfig:
    """From the spawning runner (no pydantic), or resolved here when started by hand."""
    handed = os.environ.pop(CONFIG_ENV, None)
    if handed:
        return WorkerConfig.from_json(handed)
    from ..protocol.settings import load_settings, resolve_paths

    settings = load_settings()
    return WorkerConfig.from_settings(settings, resolve_paths(settings, Path(project)))


class Booted:
    """A worker's settings and store connection, opened before it knows its run.

    A spare (``worker.spare``) opens them while it waits for a run, so the
    claimed run does not wait for them; ``config_json`` is what they were
    opened from, and they are used only if the run's request hands the same.
    """

    def __init__(self, config_json: str, settings: WorkerConfig, store: Store) -> None:
        self.config_json = config_json
        self.settings = settings
        self.store = store


def preboot(config_json: str) -> Booted | None:
    """Settings and store from ``config_json``; None (boot them later) on any trouble.

    One attempt, no retries: a spare that cannot open the store now leaves
    it to the ordinary boot, with its retries and its exit codes, once it
    has a run to report them for.
    """
    try:
        settings = WorkerConfig.from_json(config_json)
        store = open_worker_store(settings)
    except (PiWorkflowsError, OSError, ValueError, KeyError, TypeError):
        return None
    deadline_s = settings.lease_ms / 1000
    return Booted(config_json, settings,
                  with_retries(store, deadline_s=deadline_s, on_retry=_log_retry))


def _boot(project: str, booted: Booted | None) -> tuple[WorkerConfig, Store]:
    if booted is not None:
        settings, store = booted.settings, booted.store
    else:
        settings = load_config(project)
        # A busy store never kills a worker: every call backs off and retries
        # for up to a lease (past that the claim has expired anyway).
        store = with_retries(
            retry_store(lambda: open_worker_store(settings),
                        deadline_s=settings.lease_ms / 1000, on_retry=_log_retry),
            deadline_s=settings.lease_ms / 1000, on_retry=_log_retry)
    _LOG.config = settings
    return settings, store


def run_worker(args: argparse.Namespace, *, host_pidfd: int | None = None,
               booted: Booted | None = None) -> int:
    """One worker's life from its parsed arguments (a fork skips the parser).

    ``booted``: settings and store a spare opened before its run was known.
    """
    key = project_key(Path(args.project))
    set_title(worker_title(key, args.run, "booting"))
    if host_pidfd is None:
        # A forked worker must not follow its zygote (a zygote restart leaves
        # runs alone); it follows the host through ``host_pidfd`` instead.
        die_with_parent()
    control = Control()
    nudge = threading.Event()
    install_signals(control, nudge)
    parent = ParentWatch(args.parent_pid if args.parent_pid is not None else os.getppid(),
                         host_pidfd)
    if parent.gone():
        return WorkerExit.PARKED  # the supervisor died before we could ask to follow it
    try:
        settings, store = _boot(args.project, booted)
        paths = settings.paths
    except StoreTransientError as exc:
        # Busy for a whole lease: a crash, so the host restarts it (not a boot error).
        sys.stderr.write(f"pi-workflows worker: store busy at boot: {exc}\n")
        return WorkerExit.CRASHED
    except (PiWorkflowsError, OSError) as exc:
        sys.stderr.write(f"pi-workflows worker: boot error: {exc}\n")
        return WorkerExit.BOOT_ERROR
    # Taken out of the environment so no shell command or agent inherits it.
    token = os.environ.pop(TOKEN_ENV, "")
    set_title(worker_title(key, args.run, "starting"))
    state = QueueState(args.claim_state)
    claim = Claim(args.run, args.runner, token, 0, state, state)
    try:
        store.verify(claim.run_id, token)
    except ClaimLost:
        return WorkerExit.CLAIM_LOST
    return _execute(args, settings, paths, store, claim, control, parent, nudge)


def pi_executor(settings: WorkerConfig, paths: Paths, store: Store,
                claim: Claim) -> PiExecutor:
    """The run's agent executor; Pi itself starts only with the first agent node."""
    from .capture import Capture
    from .pi_executor import PiExecutor, PiSettings

    # Its own writer (its own lock handle): capture runs beside the engine's writes.
    side = BundleWriter(Bundle(paths.runs_dir, claim.run_id), store, claim.token, fsync="never")

    def record(pid: int) -> None:
        side.write_processes(with_entry(side.bundle.processes(),
                                        child_record(pid, "pi", claim.runner_id)))

    # The launcher's agent dir, recorded with the run, wins over this runner's own
    # (protocol.agentenv); provider variables are this process's environment.
    agent_dir = store.launch_agent_dir(claim.run_id) or settings.pi_agent_dir
    return PiExecutor(PiSettings(settings.pi_bin, settings.pi_args, agent_dir,
                                 settings.agent_reminders),
                      project_dir=paths.project, session_dir=side.bundle.session_dir,
                      record_process=record, capture=Capture(side.capture))


class _LazyAgent:
    """The agent executor, built (and Pi support imported) by the first agent node."""

    def __init__(self, make: Callable[[], AgentExecutor]) -> None:
        self._make = make
        self._agent: AgentExecutor | None = None

    def run(self, request: AgentRequest, hooks: AgentHooks,
            stop: threading.Event) -> AgentResult:
        if self._agent is None:
            self._agent = self._make()
        return self._agent.run(request, hooks, stop)

    def warm(self) -> None:
        if self._agent is None:
            self._agent = self._make()
        warm = getattr(self._agent, "warm", None)
        if callable(warm):
            warm()

    def close(self) -> None:
        close = getattr(self._agent, "close", None)
        if callable(close):
            close()

    def pending_step(self) -> tuple[str, str] | None:
        """The in-session step delivered and not judged, if any (node, attempt)."""
        pending = getattr(self._agent, "pending", None)
        return pending if isinstance(pending, tuple) else None


def owe_lost_step_turn(store: Store, claim: Claim, agent: _LazyAgent) -> None:
    """The claim went while the session's conversation had a step of it: tell the session.

    Only for in-session steps (``pending_step``); the store records the turn
    once per attempt, so a second call or a crash between is harmless.
    """
    pending = agent.pending_step()
    if pending is None:
        return
    row = store.get(claim.run_id)
    session = None if row is None else row.origin_session
    if session is None:
        return
    try:
        store.owe_claim_lost_turn(session, claim.run_id, pending[0], pending[1],
                                  workflow=None if row is None else row.workflow)
    except PiWorkflowsError as exc:  # a busy store: the session's next catch-up still shows it
        sys.stderr.write(f"pi-workflows worker {claim.run_id}: {exc.code}: {exc.message}\n")


def agent_executor(settings: WorkerConfig, paths: Paths, store: Store, claim: Claim,
                   control: Control) -> AgentExecutor:
    """In the session's own conversation when a Pi session runs this run, else headless."""
    if settings.conversation is None:
        return pi_executor(settings, paths, store, claim)
    from .conversation import SessionExecutor

    row = store.get(claim.run_id)
    session = None if row is None else row.origin_session

    def delivered() -> None:
        # The step message itself tells the model where the run stands: a turn
        # owed for a claim lost earlier is moot, not sent as well.
        if session is not None:
            store.supersede_turns(session, claim.run_id)

    return SessionExecutor(settings.conversation, run_id=claim.run_id,
                           workflow=None if row is None else row.workflow, session=session,
                           reminders=settings.agent_reminders,
                           headless=lambda: pi_executor(settings, paths, store, claim),
                           park=control.request_park, delivered=delivered)


def _execute(args: argparse.Namespace, settings: WorkerConfig, paths: Paths, store: Store,
             claim: Claim, control: Control, parent: ParentWatch,
             nudge: threading.Event) -> int:
    stop = threading.Event()
    lost = threading.Event()
    threading.Thread(target=_watch_parent, args=(control, parent, stop), daemon=True).start()
    threading.Thread(target=_renew, args=(settings, claim, control, lost, stop, nudge),
                     daemon=True, name="pi-workflows-renew").start()

    key = project_key(paths.project)
    # Shell output while it runs, through a writer of its own (its own lock handle).
    live = BundleWriter(Bundle(paths.runs_dir, claim.run_id), store, claim.token, fsync="never")
    streams = OutputStreams(live.stream_output, lambda: live.bundle.output_path.stat().st_size)

    def on_engine(engine: Engine) -> None:
        engine.on_node = lambda node: set_title(worker_title(key, args.run, f"node={node}"))
        engine.output = streams

    agent = _LazyAgent(lambda: agent_executor(settings, paths, store, claim, control))
    try:
        writer = BundleWriter(Bundle(paths.runs_dir, claim.run_id), store, claim.token,
                              fsync=settings.fsync)
        existing = writer.bundle.processes()
        writer.write_processes(with_entry(existing, self_record("worker", args.runner)))
        result = execute_claim(store, claim, runs_dir=paths.runs_dir, project_dir=paths.project,
                               fsync=settings.fsync, control=control, force=args.force,
                               park_grace_s=settings.park_grace_s, agent=agent,
                               engine_hook=on_engine)
    except ClaimLost:
        owe_lost_step_turn(store, claim, agent)
        return WorkerExit.CLAIM_LOST
    except BundleCorrupt as exc:
        # The bundle cannot be written (raised before the engine runs, by the
        # processes record): the run fails now, in the queue, and the worker
        # exits as finished: no restart, no crash budget spent.
        sys.stderr.write(f"pi-workflows worker {args.run}: {exc.code}: {exc.message}\n")
        try:
            fail_unwritable(store, claim, exc)
        except ClaimLost:
            return WorkerExit.CLAIM_LOST  # the claim went meanwhile: its new owner decides
        except PiWorkflowsError as failed:  # the store stayed busy: a crash, tried again
            sys.stderr.write(f"pi-workflows worker {args.run}: {failed.code}: {failed.message}\n")
            return WorkerExit.CRASHED
        return WorkerExit.FINISHED
    except PiWorkflowsError as exc:
        # Expected trouble (a busy store for a whole lease, a locked bundle):
        # one line, and an exit the host restarts the run after.
        sys.stderr.write(f"pi-workflows worker {args.run}: {exc.code}: {exc.message}\n")
        return WorkerExit.BUNDLE_LOCKED if exc.code == "bundle_locked" else WorkerExit.CRASHED
    except OSError as exc:
        if exc.errno == errno.EROFS:
            # Not waited out (a read-only remount wants a person): a crash, in one line.
            sys.stderr.write(f"pi-workflows worker {args.run}: read-only filesystem:"
                             f" {exc.filename or exc}\n")
            return WorkerExit.CRASHED
        if not is_disk_full(exc):
            raise
        # Expected too, and not a crash: one line, and the exit that tells the
        # runner to wait for space instead of spending the run's crash budget.
        sys.stderr.write(f"pi-workflows worker {args.run}: disk_full: {disk_full_line(exc)};"
                         " the run waits for space\n")
        return WorkerExit.DISK_FULL
    finally:
        agent.close()  # Pi and its bash commands stop before the worker exits
        stop.set()
        nudge.set()  # the renewal thread sees the stop now
    if lost.is_set() and result.outcome == PARKED:
        owe_lost_step_turn(store, claim, agent)
        return WorkerExit.CLAIM_LOST
    return WorkerExit.PARKED if result.outcome == PARKED else WorkerExit.FINISHED
