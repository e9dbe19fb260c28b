"""The ``paths`` command: where a project's store, bundles, host lock and logs are.

Owns printing the resolved ``protocol.paths.Paths`` of a project, as aligned
lines or as JSON. ``register(app)`` adds the command. Must not import the
worker or another command module.
"""

from __future__ import annotations

from pathlib import Path

import typer

from ..options import JsonOpt, ProjectOpt, emit_json, project_context


def paths_command(project: ProjectOpt = Path("."), as_json: JsonOpt = False) -> None:
    """Show where the store, run bundles, host lock and logs are for a project.

    Example: pi-workflows paths --json
    """
    _, resolved = project_context(project)
    data = resolved.as_json()
    if as_json:
        emit_json(data)
        return
    width = max(len(k) for k in data)
    for key, value in data.items():
        typer.echo(f"{key:<{width}}  {value}")


def register(app: typer.Typer) -> None:
    app.command("paths")(paths_command)
