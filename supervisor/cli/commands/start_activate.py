"""The deferred launch of a session's run: ``start`` and ``activate``.

Owns parsing their arguments and printing their results; the protocol is
``supervisor.session.activation`` (``start`` reserves a run for a session,
``activate`` starts it at the session's idle boundary) and the stdin
lifeline of ``activate --park-on-eof`` is ``supervisor.session.lifeline``.
The Pi extension's exact ``activate --session S --park-on-eof`` is also on
the fast command line (``supervisor.cli.main``), which does what
``activate_command`` does without typer. ``register(app)`` adds both
commands. Must not import the worker or another command module.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer

from ....protocol.agentenv import resolve_agent_dir
from ....protocol.definitions.discovery import resolve_for
from ....protocol.store import open_store
from ...session.actions import start_json
from ...session.activation import activate, start
from ...session.launch import prepare_run
from ...session.lifeline import stdin_lifeline
from ...views.runview import terminal_view
from ...views.status import run_status
from ..options import (
    ByAgentOpt,
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
    required_session,
)


def start_command(
    name: NameArg,
    task: TaskArg = None,
    input_json: InputJsonOpt = None,
    input_file: InputFileOpt = None,
    session: SessionOpt = None,
    by_agent: ByAgentOpt = False,
    project: ProjectOpt = Path("."),
    as_json: JsonOpt = False,
) -> None:
    """Queue a run for SESSION to start later with `activate` (a durable deferred launch).

    Every check runs first (workflow, input, store, the session's one active
    run); only then is the run reserved, and its final id printed. Nothing
    runs until `pi-workflows activate --session S`; a host never starts it.
    With --by-agent (the session's model started it) a failure or time-out
    after it started gives the session's model one follow-up turn. Refused
    (exit 2) while the session is owed a presentation turn.

    Example: pi-workflows start review "fixed the login bug" --session editor-1
    """
    settings, paths = project_context(project)
    owner = required_session(session, "start")
    raw = parse_input(task, input_json, input_file)
    prepared = replace(prepare_run(resolve_for(settings, paths.project, name), name, raw),
                       agent_dir=resolve_agent_dir(settings.pi_agent_dir))
    with open_store(settings, paths.store_file) as store:
        row = start(store, prepared, owner, by_agent=by_agent)
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
    owner = required_session(session, "activate")
    with open_store(settings, paths.store_file) as store:
        with terminal_view(typer.echo, project=paths.project, quiet=as_json) as view:
            code = activate(store, settings, paths, owner, view=view,
                            lifeline=stdin_lifeline if park_on_eof else None)
        if as_json:
            mine = store.session_run(owner)
            emit_json({"session": owner,
                       "run": None if mine is None else run_status(mine, paths.runs_dir)})
    raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    app.command("start")(start_command)
    app.command("activate")(activate_command)
