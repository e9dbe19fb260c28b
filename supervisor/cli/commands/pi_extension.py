"""The ``pi-extension`` command: where the Pi extension file is.

Owns printing the absolute path of the Pi extension shipped as package data
(``supervisor/piext/pi_workflows.ts``). ``register(app)`` adds the command.
Must not import the worker or another command module.
"""

from __future__ import annotations

from pathlib import Path

import typer

from ..options import JsonOpt, ProjectOpt, emit_json

# supervisor/piext/, package data beside the wings.
EXTENSION = Path(__file__).resolve().parents[2] / "piext" / "pi_workflows.ts"


def pi_extension_command(project: ProjectOpt = Path("."), as_json: JsonOpt = False) -> None:
    """Print the absolute path of the pi-workflows Pi extension (a TypeScript file).

    Load it for one Pi session with `pi -e "$(pi-workflows pi-extension)"`;
    docs/pi-extension.md says how to install it for good. The path is the
    same for every project (--project is accepted and changes nothing).

    Example: pi-workflows pi-extension --json
    """
    del project  # one file for every project
    if as_json:
        emit_json({"path": str(EXTENSION)})
    else:
        typer.echo(str(EXTENSION))


def register(app: typer.Typer) -> None:
    app.command("pi-extension")(pi_extension_command)
