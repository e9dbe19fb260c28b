"""Durable deferred launches (seed 002): ``start`` reserves, ``activate`` starts.

Owns the session side of a launch. ``start`` runs every check that can run
before acknowledgement, then commits one ``queued`` reservation bound to the
session; nothing runs. ``activate`` is the safe idle boundary: it recovers
the session's interrupted launch, claims its queued run by compare-and-set
(a repeated or concurrent ``activate`` never starts it twice), and drives it
like ``run``: the worker re-checks the source, lays out the bundle, passes
the final fence (``mark_running``) and only then runs the first node. A
launch that fails after acknowledgement is ``failed`` with a stable code,
and the store gives its session one follow-up turn intent in the same
transaction. Imports ``protocol``, ``procs``, ``views`` and the session
wing's runner, actions and preflight; never ``host`` or ``cli``.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...protocol.bundle import bundle_exists
from ...protocol.errors import ConflictError, ExitCode, TransitionRefused
from ...protocol.paths import Paths, project_key
from ...protocol.settingspec import SettingsLike
from ...protocol.states import CLAIMED, QueueState
from ...protocol.store import Claim, QueueRow, Store
from ..procs.gone import clear_gone_holder
from ..procs.oslayer import OsLayer
from ..views.runview import RunView
from ..views.wording import cli
from .runner import Echo, SessionRunner, session_runner

if TYPE_CHECKING:
    from .launch import Prepared

Q = QueueState


def start(store: Store, prepared: Prepared, session: str, *,
          by_agent: bool = False) -> QueueRow:
    """Commit the reservation; every preflight check has run by now (seed 002, Start)."""
    from .actions import reserve  # here: ``activate`` (its start-up is timed) needs none of it

    return reserve(store, prepared, session, by_agent=by_agent)


@dataclass(frozen=True)
class Activation:
    """What ``activate`` found to do: a claim to drive, or why there is none."""

    code: int | None  # the exit code when nothing was driven
    message: str


def _nothing(message: str) -> Activation:
    return Activation(ExitCode.OK, message)


def activate(store: Store, settings: SettingsLike, paths: Paths, session: str, *,
             echo: Echo | None = None, view: RunView | None = None,
             os_layer: OsLayer | None = None,
             lifeline: Callable[[Callable[[], None]], None] | None = None) -> int:
    """Start (or recover) this session's launch here and show it; the run's exit code.

    With nothing to activate it says so and returns 0. ``lifeline``, if
    given, is handed a callback that parks the run as SIGTERM would (the
    stop is recorded like a signal, so it works at any point, before the
    worker starts too).
    """
    with session_runner(store, settings, paths, echo=echo, view=view,
                        os_layer=os_layer) as runner:
        if lifeline is not None:
            # One stop, not a second: a SIGTERM just before the parent exits already
            # asked for the park, and a second stop would kill the worker instead.
            lifeline(lambda: None if runner.stops else runner.stops.append(signal.SIGTERM))
        found = _claim(store, paths, session, runner)
        if isinstance(found, Activation):
            runner.echo(found.message)
            return ExitCode.OK if found.code is None else found.code
        return runner.drive(found)


def _claim(store: Store, paths: Paths, session: str,
           runner: SessionRunner) -> Claim | Activation:
    """The session's launch, claimed here; recovery of an interrupted one comes first.

    A ``starting`` row whose holder is gone (no runner row, or a dead
    process: ``procs.gone``, never a wall-clock lease) goes back to
    ``queued`` if it has no bundle (the seed's recovery) and is claimed
    again; one with a bundle, or a ``running`` row, is taken over, and the
    worker reconciles it from its bundle (resume, settle, or fail).
    """
    row = store.find_session_reservation(session)
    if row is None:
        return _nothing(f"nothing to activate for session {session}")
    gone = None
    if row.state in CLAIMED and row.runner_id is not None:
        gone = clear_gone_holder(store, runner.os, project_key(paths.project), row.run_id,
                                 row.runner_id)
    if row.state == Q.STARTING and not bundle_exists(paths.runs_dir, row.run_id):
        try:
            row = store.requeue_expired_starting(row.run_id, gone=gone)
        except TransitionRefused:
            return _nothing(f"run {row.run_id} of session {session} is starting in another"
                            f" process; `{cli(paths.project, 'status', '--session', session)}`"
                            " shows it")
    try:
        return store.claim_by_id(row.run_id, runner.runner_id, session=session, gone=gone)
    except (TransitionRefused, ConflictError) as exc:
        if exc.code == "run_paused":
            return _nothing(exc.message)
        if row.state in CLAIMED or exc.code == "claimed_elsewhere":
            return _nothing(f"run {row.run_id} of session {session} is already {row.state}"
                            f" elsewhere; `{cli(paths.project, 'watch', row.run_id)}` follows"
                            " it")
        return _nothing(f"run {row.run_id} was taken by another activation meanwhile")


def run_in_session(store: Store, settings: SettingsLike, paths: Paths, prepared: Prepared,
                   session: str, *, echo: Echo | None = None, view: RunView | None = None,
                   os_layer: OsLayer | None = None) -> int:
    """``run NAME --session S``: ``start`` and ``activate`` in one command."""
    start(store, prepared, session)
    return activate(store, settings, paths, session, echo=echo, view=view, os_layer=os_layer)

