"""Resuming a run: lifting what holds a paused or parked run, for ``resume`` and the dashboard.

Owns ``lift``: refusing a run a chat holds, withdrawing a pause that has not
reached its boundary yet, lifting a pause, accepting a changed workflow file
(only when forced: ``protocol.settle.repin_source``) and unblocking a run
parked for a person; and ``Lifted``, what that did. Where the run goes next
(a host woken, or this terminal driving it) is the caller's: the ``resume``
command and ``web.actions`` both call this. Imports ``protocol`` and
``views.holds``; never ``cli``, ``web``, ``host`` or the worker.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ...protocol.errors import UsageError
from ...protocol.settle import repin_source
from ...protocol.states import CLAIMED, PAUSED_CODE, TERMINAL, QueueState
from ...protocol.store import QueueRow, Store
from ..views.holds import chat_hold, hold_text

# How a refusal of a changed workflow file says to accept it; a caller that
# offers no --force (the dashboard) names the command line instead.
FORCE_HINT = "resume with --force (or cancel the run)"


@dataclass(frozen=True)
class Lifted:
    row: QueueRow  # the row right after
    paused: bool  # a pause was lifted (or withdrawn)
    withdrawn: bool  # the pause had not taken hold: the run goes on running


def lift(store: Store, runs_dir: Path, row: QueueRow, *, force: bool, fsync: str,
         force_hint: str = FORCE_HINT) -> Lifted:
    """Free ``row``'s run for its next owner; refused (``UsageError``) when it cannot be."""
    run = row.run_id
    hold = chat_hold(store, row)
    if hold is not None:
        raise UsageError(f"run {run} waits: it is {hold_text(hold)}; it resumes when that"
                         " chat ends (leave Pi there)", code="held")
    paused = row.error_code == PAUSED_CODE and row.state not in TERMINAL
    if paused and row.state in CLAIMED:
        # Asked to pause, not there yet: the request is withdrawn, it goes on.
        return Lifted(store.unpause(run), paused=True, withdrawn=True)
    if row.state != QueueState.PARKED and not paused:
        raise UsageError(f"run {run} is {row.state}; only a paused or parked run can be"
                         " resumed", code="not_parked")
    if paused:
        row = store.unpause(run)
    elif row.error_code == "source_changed":
        if not force:
            raise UsageError(
                f"run {run} waits because its workflow file changed since it started;"
                f" check the change, then {force_hint}", code="source_changed")
        row = repin_source(store, runs_dir, run, fsync=fsync)
    elif row.error_code is not None:
        # Parked blocked for a person (a bundle that stayed locked, a crash
        # loop that could not be recorded): this is that person.
        row = store.unblock(run)
    return Lifted(row, paused=paused, withdrawn=False)
