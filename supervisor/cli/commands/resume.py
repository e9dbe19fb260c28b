"""The ``resume`` command: a parked run, for the host or here.

Owns parsing ``resume``'s arguments and printing its result: freeing the
run (``supervisor.session.resume``, shared with the dashboard; a changed
workflow file is accepted with ``--force``), then waking the host or
driving the run in this terminal with the session runner
(``supervisor.session.runner``).
``register(app)`` adds the command. Must not import the worker or another
command module.
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Annotated

import typer

from ....protocol.states import QueueState
from ...session.actions import wake_host
from ...session.lifeline import stdin_lifeline
from ...session.resume import lift
from ...session.runner import session_runner
from ...views.runref import existing_row as _existing
from ...views.runref import project_store as _store
from ...views.runview import terminal_view
from ...views.status import run_status
from ..options import (
    JsonOpt,
    ProjectOpt,
    RunArg,
    SessionOpt,
    emit_json,
    project_context,
    session_id,
)


def resume_command(
    run: RunArg,
    force: Annotated[bool, typer.Option(
        "--force", help="Continue on a workflow file that changed since the run started "
                        "(the change is recorded in the run's trace).")] = False,
    here: Annotated[bool, typer.Option(
        "--here", help="Run it in this terminal now, shown live, instead of in a host.")] = False,
    session: SessionOpt = None,
    park_on_eof: Annotated[bool, typer.Option(
        "--park-on-eof",
        help="With --here or --session: park the run again (as SIGTERM does) once standard"
             " input reaches end of file, as `activate --park-on-eof` does.")] = False,
    project: ProjectOpt = Path("."),
    as_json: JsonOpt = False,
) -> None:
    """Resume a paused or parked run (a host picks it up), or accept its changed workflow file.

    A paused run (`pi-workflows pause`) continues at the node it was paused
    before; a run asked to pause that has not reached its boundary yet has
    the request withdrawn.

    With --here (or --session, as that session) the run continues in this
    terminal at once, shown live like `run`, with `run`'s exit codes.

    Example: pi-workflows resume 20261201T083022Z-pipeline-025acc92 --here
    """
    settings, paths = project_context(project)
    owner = session_id(session)
    with _store(settings, paths) as store:
        row = _existing(store, run, paths)
        run = row.run_id
        lifted = lift(store, paths.runs_dir, row, force=force, fsync=settings.fsync)
        row, paused = lifted.row, lifted.paused
        if lifted.withdrawn:
            _said(as_json, {"runId": run, "state": row.state, "forced": False},
                  f"{run}: pause withdrawn; it goes on running")
            return
        if here or owner is not None:
            with terminal_view(typer.echo, project=paths.project, quiet=as_json) as view, \
                    session_runner(store, settings, paths, view=view) as runner:
                if park_on_eof:
                    # One stop, not a second (as for `activate --park-on-eof`).
                    stdin_lifeline(lambda: None if runner.stops
                                   else runner.stops.append(signal.SIGTERM))
                code = runner.drive(store.claim_by_id(run, runner.runner_id, session=owner))
            if as_json:
                found = store.get(run)
                emit_json(run_status(found, paths.runs_dir) if found else {"runId": run})
            raise typer.Exit(code)
        wake_host(store, paths)
    queued = row.state == QueueState.QUEUED
    if queued and row.origin_session is not None:
        # A session's reservation: its session starts it, not a host.
        _said(as_json, {"runId": run, "state": row.state, "forced": force},
              f"{run}: resumed; `pi-workflows activate --session {row.origin_session}`"
              " starts it")
        return
    _said(as_json, {"runId": run, "state": row.state, "forced": force},
          f"{run}: {'resumed, ' if paused else ''}{row.state} and ready; a running host"
          f" {'starts' if queued else 'resumes'} it")


def _said(as_json: bool, data: dict[str, object], line: str) -> None:
    if as_json:
        emit_json(data)
    else:
        typer.echo(line)


def register(app: typer.Typer) -> None:
    app.command("resume")(resume_command)
