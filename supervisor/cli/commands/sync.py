"""The ``sync`` command: catch a session up, once or with ``--follow``.

Owns parsing ``sync``'s arguments, printing each snapshot (lines or JSON)
and the ``--follow`` poll; what a snapshot holds and confirming its
delivery is ``supervisor.session.sync``, shared with the fast command line.
``register(app)`` adds the command. Must not import the worker or another
command module.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated

import typer

from ....protocol.store import open_store
from ...session import sync as catchup
from ..options import JsonOpt, ProjectOpt, SessionOpt, emit_json, project_context, required_session

FOLLOW_POLL_S = 0.2


def sync_command(
    session: SessionOpt = None,
    follow: Annotated[bool, typer.Option(
        "--follow", help="Keep showing what changes, until Ctrl-C.")] = False,
    hold_follow_ups: Annotated[bool, typer.Option(
        "--hold-follow-ups",
        help="Lease follow-ups instead of resolving them; the client delivers each one,"
             " then runs `resolve-follow-up INTENT --token TOKEN`.")] = False,
    project: ProjectOpt = Path("."),
    as_json: JsonOpt = False,
) -> None:
    """Catch SESSION up: every run that changed since its last sync, once, in its latest state.

    Also delivers the session's notifications and follow-ups, each once. The
    first sync of a session shows its own runs and the project's parked and
    waiting ones. With --follow, new changes are shown as they happen.

    Example: pi-workflows sync --session editor-1 --json
    """
    settings, paths = project_context(project)
    owner = required_session(session, "sync")
    with open_store(settings, paths.store_file) as store:
        first = True
        try:
            while True:
                if not first and store.nothing_new(owner):
                    time.sleep(FOLLOW_POLL_S)  # an idle poll reads; it never writes
                    continue
                snapshot = catchup.take(store, paths.runs_dir, owner,
                                        hold_follow_ups=hold_follow_ups)
                if as_json:
                    if first and not follow:
                        emit_json(snapshot.as_json())
                    elif first or not snapshot.empty:
                        # --follow --json: one object per line, for a client to read.
                        typer.echo(json.dumps(snapshot.as_json(), sort_keys=True))
                else:
                    catchup.show(snapshot, typer.echo, quiet_when_empty=not first)
                catchup.delivered(store, snapshot)
                if not follow:
                    return
                first = False
                time.sleep(FOLLOW_POLL_S)
        except KeyboardInterrupt:
            return  # what was shown is confirmed; the rest comes next time


def register(app: typer.Typer) -> None:
    app.command("sync")(sync_command)
