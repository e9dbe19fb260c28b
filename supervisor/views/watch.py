"""``pi-workflows watch``: a live, read-only view of one run until it settles.

Owns the watch loop: show what the run wrote (through a
``supervisor.views.runview`` view), poll its queue row, and turn how it
ended into the command's exit code. Watching never writes anything: closing
the view changes nothing about the run. Imports ``protocol`` and the views'
follower, view protocol, wording and next commands.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from ...protocol.bundle import Bundle
from ...protocol.errors import ExitCode, NotADirectory
from ...protocol.states import (
    SETTLED_STATUSES,
    TERMINAL,
    UNOWNED,
    exit_code,
    is_paused,
    seen_status,
)
from ...protocol.store import Store
from .follower import TraceFollower, ended_without_bundle
from .nextcmd import chain_end
from .runview import RunView, as_view
from .wording import cli


def _directories(runs_dir: Path, bundle: Bundle) -> None:
    """Refuse a runs directory or a bundle path that is a file (or anything else).

    A missing one is fine (the run has not started yet); one that exists and
    is not a directory can never be followed, and reading inside it would
    fail with ``NotADirectoryError`` at every poll.
    """
    for path, what in ((runs_dir, "the runs path"), (bundle.dir, "the run's bundle path")):
        if path.exists() and not path.is_dir():
            raise NotADirectory(str(path), f"{what} is not a directory")


def watch(store: Store, runs_dir: Path, run_id: str, *, echo: Callable[[str], None] | None = None,
          view: RunView | None = None, poll_s: float = 0.2, project: Path | None = None) -> int:
    """Show the run's events as they are written; return the exit code for how it ended.

    ``project`` goes into the commands it suggests (``--project``).
    """
    shown = as_view(echo, view)
    follower = TraceFollower(Bundle(runs_dir, run_id))
    said: str | None = None
    while True:
        _directories(runs_dir, follower.bundle)
        shown.show(follower)
        row = store.get(run_id)
        if row is None:
            shown.say(f"run {run_id} is gone from the queue")
            return ExitCode.USAGE
        status = follower.status()
        if row.state in TERMINAL:
            shown.show(follower)  # the bundle settles before the queue: its last events
            child = store.continuation_of(run_id)
            shown.end(follower, row, answered=child is not None)
            if child is not None:
                end = chain_end(store, child).run_id
                shown.say(f"answered: the chain goes on as {end}; follow it with"
                          f" `{cli(project, 'watch', end)}`")
            if status not in SETTLED_STATUSES:
                shown.say(ended_without_bundle(row, project))
            seen = seen_status(row.state, status, row.cancel_requested)
            if seen != status:
                shown.say("cancelled while it waited")
            code = exit_code(row.state, seen)
            return ExitCode.RUN_FAILED if code is None else code
        if is_paused(row.state, row.error_code):
            # Held for a person: no runner moves it, so watching longer shows
            # nothing. It ends like a parked `run` (exit 4), with the way on.
            shown.show(follower)
            shown.end(follower, row)
            shown.say(f"paused; `{cli(project, 'resume', run_id)}` continues it")
            return ExitCode.PARKED
        if row.state in UNOWNED and said != row.state:
            reason = f" [{row.error_code}] {row.error_message}" if row.error_code else ""
            shown.say(f"{row.state}{reason}; waiting for a runner (is"
                      f" `{cli(project, 'host')}` running?)")
        said = row.state
        time.sleep(poll_s)
