"""The ``run`` command: start a run of a workflow, here and shown live, or queued.

Owns parsing ``run``'s arguments and printing its result; the work is
``supervisor.session.actions`` (checks and ``--detach``: shared with the fast
command line), the session runner (``supervisor.session.runner``) and a
session's launch (``supervisor.session.activation``). ``register(app)`` adds
the command. Must not import the worker or another command module.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ....protocol.store import open_store
from ...session import actions
from ...session.activation import run_in_session
from ...session.runner import run_attached
from ...views.runview import terminal_view
from ...views.status import run_status
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


def run_command(
    name: NameArg,
    task: TaskArg = None,
    input_json: InputJsonOpt = None,
    input_file: InputFileOpt = None,
    detach: Annotated[bool, typer.Option(
        "--detach", help="Queue the run for the host and print its id.")] = False,
    session: SessionOpt = None,
    project: ProjectOpt = Path("."),
    as_json: JsonOpt = False,
) -> None:
    """Start a run of workflow NAME, here and watched live (or queued with --detach).

    Without --detach the run starts in this terminal and its steps are shown
    as they happen; with --session it is that session's run (`start` and
    `activate` in one). Ctrl-C, closing the terminal or SIGTERM parks it, and
    a running `pi-workflows host` resumes it. With --detach the host runs it
    (and --session only addresses its notifications). Exit codes: 0
    completed, 1 failed or cancelled, 3 waiting at a checkpoint, 4 parked.

    Example: pi-workflows run review fix the login bug --detach
    """
    settings, paths = project_context(project)
    owner = session_id(session)
    raw = parse_input(task, input_json, input_file)
    prepared = actions.prepare(settings, paths, name, raw)
    if not detach:
        with open_store(settings, paths.store_file) as store, \
                terminal_view(typer.echo, project=paths.project, quiet=as_json) as view:
            if owner is None:
                code = run_attached(store, settings, paths, prepared, view=view)
            else:
                code = run_in_session(store, settings, paths, prepared, owner, view=view)
            if as_json:
                row = store.get(prepared.run_id)
                emit_json(run_status(row, paths.runs_dir) if row else {"runId": prepared.run_id})
        raise typer.Exit(code)
    row = actions.detach(settings, paths, prepared, owner)
    if as_json:
        emit_json(actions.detach_json(row))
    else:
        typer.echo(row.run_id)


def register(app: typer.Typer) -> None:
    app.command("run")(run_command)
