"""The session commands: ``start``, ``activate`` and ``sync``.

Owns parsing their arguments and printing their results; the protocol is in
``supervisor.session.activation`` (deferred launches) and ``supervisor.session.sync``
(catch-up). ``register(app)`` adds the commands. Never imports the worker.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from ....protocol.definitions.discovery import resolve_for
from ....protocol.store import open_store
from ...session import sync as catchup
from ...session.actions import start_json
from ...session.activation import activate, start
from ...session.launch import prepare_run
from ...views.runview import terminal_view
from ...views.status import run_status
from ..exits import session_required
from ..options import (
    InputFileOpt,
    InputJsonOpt,
    JsonOpt,
    NameArg,
    ProjectOpt,
    SessionOpt,
    TaskArg,
    emit_json,
    parse_input,
    project_context,
    session_id,
)

FOLLOW_POLL_S = 0.2


def stdin_lifeline(stop: Callable[[], None], fd: int = 0) -> None:
    """Call ``stop`` (from a daemon thread) once ``fd`` (standard input) reaches end of file.

    The pipe's other end is the parent's (the Pi extension's): when the
    parent exits, however it exits, the kernel closes it.
    """
    def watch() -> None:
        with contextlib.suppress(OSError):
            while os.read(fd, 4096):
                pass
        stop()

    threading.Thread(target=watch, name="stdin-lifeline", daemon=True).start()


def _required(session: str | None, command: str) -> str:
    checked = session_id(session)
    if checked is None:
        raise session_required(command)
    return checked


def start_command(
    name: NameArg,
    task: TaskArg = None,
    input_json: InputJsonOpt = None,
    input_file: InputFileOpt = None,
    session: SessionOpt = None,
    project: ProjectOpt = Path("."),
    as_json: JsonOpt = False,
) -> None:
    """Queue a run for SESSION to start later with `activate` (a durable deferred launch).

    Every check runs first (workflow, input, store, the session's one active
    run); only then is the run reserved, and its final id printed. Nothing
    runs until `pi-workflows activate --session S`; a host never starts it.

    Example: pi-workflows start review "fixed the login bug" --session editor-1
    """
    settings, paths = project_context(project)
    owner = _required(session, "start")
    raw = parse_input(task, input_json, input_file)
    prepared = prepare_run(resolve_for(settings, paths.project, name), name, raw)
    with open_store(settings, paths.store_file) as store:
        row = start(store, prepared, owner)
    if as_json:
        emit_json(start_json(row))
    else:
        typer.echo(f"Workflow {row.workflow} queued (run {row.run_id}).")


def activate_command(
    session: SessionOpt = None,
    park_on_eof: Annotated[bool, typer.Option(
        "--park-on-eof",
        help="Park the run (as SIGTERM does) once standard input reaches end of file: a"
             " parent that holds the other end of the pipe takes the run with it when it"
             " dies, even by kill -9.")] = False,
    project: ProjectOpt = Path("."),
    as_json: JsonOpt = False,
) -> None:
    """Start SESSION's queued run here and show it live, like `run` (the safe idle boundary).

    Recovers an interrupted launch of the session first. Exit codes as for
    `run`: 0 completed (or nothing to activate), 1 failed or cancelled, 3
    waiting at a checkpoint, 4 parked. --json prints the session's run status
    at the end instead of the live lines.

    Example: pi-workflows activate --session editor-1
    """
    settings, paths = project_context(project)
    owner = _required(session, "activate")
    with open_store(settings, paths.store_file) as store:
        with terminal_view(typer.echo, project=paths.project, quiet=as_json) as view:
            code = activate(store, settings, paths, owner, view=view,
                            lifeline=stdin_lifeline if park_on_eof else None)
        if as_json:
            mine = store.session_run(owner)
            emit_json({"session": owner,
                       "run": None if mine is None else run_status(mine, paths.runs_dir)})
    raise typer.Exit(code)


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
    owner = _required(session, "sync")
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
    app.command("start")(start_command)
    app.command("activate")(activate_command)
    app.command("sync")(sync_command)
