"""The ``watch`` command: follow a run live until it settles.

Owns parsing ``watch``'s arguments; following the run is
``supervisor.views.watch``, shown by ``supervisor.views.runview``. A view
only: it changes nothing. ``register(app)`` adds the command. Must not
import the worker or another command module.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ...views.runref import existing_row as _existing
from ...views.runref import project_store as _store
from ...views.runview import JsonLinesView, terminal_view
from ...views.watch import watch
from ..options import ProjectOpt, RunArg, project_context


def watch_command(
    run: RunArg,
    project: ProjectOpt = Path("."),
    as_json: Annotated[bool, typer.Option(
        "--json", help="Print the run's trace events as JSON lines, as they are written.")
    ] = False,
) -> None:
    """Follow a run live until it settles (view only: closing it changes nothing).

    Exits 0 when the run completed, 1 when it failed or was cancelled, 3 when
    it waits at a checkpoint.

    Example: pi-workflows watch 99624cea --json
    """
    settings, paths = project_context(project)
    with _store(settings, paths) as store:
        run = _existing(store, run, paths).run_id
        if as_json:
            code = watch(store, paths.runs_dir, run, project=paths.project, view=JsonLinesView(
                typer.echo, lambda line: typer.echo(line, err=True)))
        else:
            with terminal_view(typer.echo, project=paths.project) as view:
                code = watch(store, paths.runs_dir, run, view=view,
                             project=paths.project)
    raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    app.command("watch")(watch_command)
