"""The terminal session runner: a terminal that owns one run and shows it live.

Owns driving one claimed run attached to a terminal: the process registers
as a runner of kind ``session``, one worker subprocess executes the run, and
its trace is shown as it grows. Closing the terminal (SIGHUP), Ctrl-C or
SIGTERM parks the run, and a host resumes it; if this process is killed,
the worker notices (PDEATHSIG) and parks it the same way. ``run NAME``
without a session inserts its run already claimed (``run_attached``);
deferred launches reach ``drive`` through ``supervisor.session.activation``.
Signal handlers only record. Imports ``protocol``, ``procs`` (worker handles,
the OS layer, claims) and ``views`` (the follower, the view protocol); never
``host`` or ``cli``.
"""

from __future__ import annotations

import os
import secrets
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from ...protocol.bundle import Bundle, BundleCorrupt
from ...protocol.conversation import CONVERSATION_ENV
from ...protocol.errors import ExitCode, PiWorkflowsError
from ...protocol.liveness import host_name, process_start_time
from ...protocol.paths import Paths, project_key
from ...protocol.settingspec import SettingsLike
from ...protocol.states import (
    SETTLED_STATUSES,
    TERMINAL,
    UNOWNED,
    QueueState,
    exit_code,
    is_paused,
    seen_status,
)
from ...protocol.store import Claim, Store
from ...protocol.wakeup import poke
from ...protocol.wire import PARK_MARGIN_S, WorkerExit
from ...protocol.workerconfig import WorkerConfig
from ..procs.claims import after_exit, give_back, park_disk_full
from ..procs.oslayer import OsLayer, RealOs
from ..views.follower import TraceFollower, ended_without_bundle
from ..views.runview import PlainView, RunView, as_view
from ..views.wording import cli

if TYPE_CHECKING:
    from ..procs.workers import WorkerHandle
    from .launch import Prepared

POLL_S = 0.05
Echo = Callable[[str], None]


def quiet_when_gone(echo: Echo) -> Echo:
    """``echo`` that never raises: a closed terminal (EIO, EPIPE) must not stop a park."""
    def safe(line: str) -> None:
        with suppress(OSError):
            echo(line)

    return safe


@dataclass
class SessionRunner:
    """This terminal as a runner: its id, the stop signals it saw, the OS it uses."""

    store: Store
    settings: SettingsLike
    paths: Paths
    echo: Echo
    os: OsLayer = field(default_factory=RealOs)
    runner_id: str = field(
        default_factory=lambda: f"session-{host_name()}-{os.getpid()}-{secrets.token_hex(3)}")
    stops: list[int] = field(default_factory=list)
    view: RunView | None = None  # how the run is shown (default: ``echo``'s plain lines)
    # The Pi extension's conversation socket when Pi spawned this runner: agent
    # steps then happen in that session's own conversation (protocol.conversation).
    conversation: str | None = None

    def __post_init__(self) -> None:
        if self.view is None:
            self.view = PlainView(self.echo)

    @property
    def shown(self) -> RunView:
        assert self.view is not None
        return self.view

    def drive(self, claim: Claim) -> int:
        """Run ``claim`` in one worker, shown live; return the documented exit code."""
        store, paths = self.store, self.paths
        if self.stops:  # stopped before the worker started: the run waits for a runner
            give_back(store, paths.runs_dir, claim)
            return self._outcome(claim.run_id, TraceFollower(Bundle(paths.runs_dir, claim.run_id)))
        row = store.get(claim.run_id)
        self.echo(f"run {claim.run_id} ({row.workflow if row else '?'}); Ctrl-C parks it"
                  " for a host")
        key = project_key(paths.project)
        config = replace(WorkerConfig.from_settings(self.settings, paths),
                         conversation=self.conversation)
        worker = self.os.spawn_worker(
            claim, project=paths.project, project_key=key, runner_id=self.runner_id,
            config_json=config.to_json(), now=time.monotonic())
        follower = TraceFollower(Bundle(paths.runs_dir, claim.run_id))
        code = self._follow(worker, follower)
        self._show(follower)
        if after_exit(store, self.os, key, claim, code):
            if code == WorkerExit.BOOT_ERROR:
                self._boot_failed(claim)
            elif code == WorkerExit.DISK_FULL:
                # Blocked, so no runner retries it in a loop; a host frees it once
                # a write fits again (or `pi-workflows resume RUN`).
                park_disk_full(store, paths.runs_dir, claim,
                               "the runs directory's filesystem is full")
            else:
                give_back(store, paths.runs_dir, claim)  # so a host resumes it at once
        return self._outcome(claim.run_id, follower)

    def _boot_failed(self, claim: Claim) -> None:
        """A worker that cannot start fails the run (a launch: ``activation_failed``)."""
        row = self.store.get(claim.run_id)
        launching = row is not None and row.state == QueueState.STARTING
        try:
            self.store.fail(claim.run_id, claim.token,
                            "activation_failed" if launching else "worker_boot_error",
                            "the worker could not start; its error is in the log under"
                            " `pi-workflows paths`")
        except PiWorkflowsError:
            give_back(self.store, self.paths.runs_dir, claim)

    def _follow(self, worker: WorkerHandle, follower: TraceFollower) -> int:
        """Show the trace until the worker exits; a stop signal asks it to park."""
        asked: float | None = None
        killed = False
        while (code := worker.poll()) is None:
            self._show(follower)
            now = time.monotonic()
            if self.stops and asked is None:
                self.echo("parking the run (a host resumes it); a step in progress may"
                          " finish first. Ctrl-C again stops at once: a shell or action"
                          " step cut short is then not run again by itself")
                worker.terminate(now)
                asked = now
            elif asked is not None and (
                    len(self.stops) > 1
                    or now - asked > self.settings.drain_grace_s + PARK_MARGIN_S):
                if not killed and len(self.stops) > 1:
                    self.echo(cut_short(follower.bundle, self.paths.project))
                killed = True
                worker.kill(now)
            time.sleep(POLL_S)
        return int(code)

    def _show(self, follower: TraceFollower) -> None:
        with suppress(OSError):  # a closed terminal must not stop a park
            self.shown.show(follower)

    def _outcome(self, run_id: str, follower: TraceFollower) -> int:
        row = self.store.get(run_id)
        with suppress(OSError):
            self.shown.end(follower, row)
        if row is None:
            self.echo(f"run {run_id} is gone; see `{cli(self.paths.project, 'list')}`")
            return ExitCode.PARKED
        status = seen_status(row.state, follower.status(), row.cancel_requested)
        code = exit_code(row.state, status)
        if row.state == QueueState.QUEUED and row.origin_session is not None:
            # A session's reservation: no host starts it, its session does.
            start = cli(self.paths.project, "activate", "--session", row.origin_session)
            self.echo(f"queued: `{start}` starts it")
        elif is_paused(row.state, row.error_code):
            self.echo(f"paused: `{cli(self.paths.project, 'resume', run_id)}` continues it")
        elif row.state in UNOWNED:
            poke(self.paths.state_dir)
            self.echo(f"{row.state}: `{cli(self.paths.project, 'host')}` resumes it;"
                      f" `{cli(self.paths.project, 'watch', run_id)}` follows it")
        elif row.state in TERMINAL and status not in SETTLED_STATUSES:
            self.echo(ended_without_bundle(row, self.paths.project))
        elif code is None:
            self.echo(f"run {run_id} is {row.state}; see"
                      f" `{cli(self.paths.project, 'status', run_id)}`")
            return ExitCode.PARKED
        return ExitCode.PARKED if code is None else code


@contextmanager
def session_runner(store: Store, settings: SettingsLike, paths: Paths, *, echo: Echo | None = None,
                   view: RunView | None = None,
                   os_layer: OsLayer | None = None) -> Iterator[SessionRunner]:
    """This process registered as a session runner, with its stop signals recorded.

    The run is shown by ``view``, or else as plain lines through ``echo``.
    """
    shown = as_view(echo, view)
    # Taken out of the environment so no step's shell command inherits the socket.
    conversation = os.environ.pop(CONVERSATION_ENV, None) or None
    runner = SessionRunner(store, settings, paths, quiet_when_gone(shown.say),
                           os_layer or RealOs(), view=shown, conversation=conversation)
    store.register_runner(runner.runner_id, "session", os.getpid(), process_start_time(),
                          host_name())
    previous = {sig: signal.signal(sig, lambda signum, _frame: runner.stops.append(signum))
                for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        yield runner
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        store.unregister_runner(runner.runner_id)


def run_attached(store: Store, settings: SettingsLike, paths: Paths, prepared: Prepared, *,
                 echo: Echo | None = None, view: RunView | None = None,
                 os_layer: OsLayer | None = None) -> int:
    """``run NAME`` without a session: inserted already claimed, owned here from birth."""
    with session_runner(store, settings, paths, echo=echo, view=view,
                        os_layer=os_layer) as runner:
        claim = store.insert_and_claim(prepared.run_id, prepared.source, prepared.input,
                                       runner.runner_id, agent_dir=prepared.agent_dir)
        return runner.drive(claim)


def cut_short(bundle: Bundle, project: Path | None = None) -> str:
    """What a second Ctrl-C did to the step in progress, and what comes of it."""
    try:
        node = bundle.raw_state().get("currentNode")
        nodes = {n.get("id"): n for n in bundle.snapshot().get("nodes", [])}
    except BundleCorrupt:
        node, nodes = None, {}
    run = bundle.run_id
    if not isinstance(node, str):
        return "stopped at once; the run is parked where it was"
    spec = nodes.get(node) or {}
    if spec.get("kind") in ("shell", "action") and not spec.get("idempotent"):
        # Its effect was started and may or may not have happened: a resume
        # reports it indeterminate rather than repeat it.
        return (f"stopped at once: step {node} was cut short, so its effect is indeterminate"
                " and the run will not repeat it by itself; once the run has ended,"
                f" `{cli(project, 'fork', run, '--from', node)}` runs it again")
    return f"stopped at once: step {node} was cut short; it runs again when the run resumes"
