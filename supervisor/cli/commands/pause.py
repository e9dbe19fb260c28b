"""The ``pause`` command: hold a run at its next node boundary until ``resume``.

Owns parsing ``pause``'s arguments and wording its outcome; the request and
the wait are ``supervisor.session.pause``. ``register(app)`` adds the
command. Must not import the worker or another command module.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ....protocol.states import CLAIMED, PAUSED_CODE
from ....protocol.wakeup import poke
from ...session import pause
from ...views.runref import existing_row, project_store
from ...views.wording import cli
from ..options import JsonOpt, ProjectOpt, RunArg, emit_json, project_context


def pause_command(
    run: RunArg,
    no_wait: Annotated[bool, typer.Option(
        "--no-wait", help="Return once the pause is recorded; do not wait for a running"
                          " run to reach its next node boundary.")] = False,
    project: ProjectOpt = Path("."),
    as_json: JsonOpt = False,
) -> None:
    """Pause a run at its next node boundary, and wait (up to 15 s) until it holds there.

    The step in progress finishes normally and its result is kept; the next
    step does not start. A queued or parked run is paused at once. A paused
    run stays paused through any restart of the host or its worker, until
    `pi-workflows resume RUN` (or `cancel`). A run waiting at a checkpoint,
    or one that ended, is refused (exit 2).

    Example: pi-workflows pause 99624cea
    """
    settings, paths = project_context(project)
    with project_store(settings, paths) as store:
        row = existing_row(store, run, paths)
        run = row.run_id
        row = pause.request(store, paths.runs_dir, row)
        poke(paths.state_dir)
        result = pause.Paused(row, row.state not in CLAIMED, None)
        if not no_wait:
            result = pause.settle_wait(store, paths.runs_dir, run)
    row = result.row
    if as_json:
        emit_json({"runId": run, "state": row.state, "paused": result.paused,
                   "pauseRequested": not result.paused and row.error_code == PAUSED_CODE,
                   "runStatus": result.status})
        return
    if result.paused:
        typer.echo(f"{run}: paused; `{cli(paths.project, 'resume', run)}` continues it")
    elif row.state in CLAIMED:
        typer.echo(f"{run}: pause requested; the step in progress finishes, then the run holds"
                   + ("" if no_wait else
                      f" (still running; `{cli(paths.project, 'watch', run)}` follows it)"))
    else:
        # It came to rest another way (completed, failed, waited) before a boundary.
        typer.echo(f"{run}: {result.status or row.state} before the pause took effect")


def register(app: typer.Typer) -> None:
    app.command("pause")(pause_command)
