"""The commands a Pi session needs beyond the session ones: ``pi-extension`` and
``resolve-follow-up``.

Owns printing the path of the Pi extension shipped as package data
(``supervisor/piext/pi_workflows.ts``) and the second step of the two-step
follow-up delivery (``sync --hold-follow-ups`` leases, the client delivers,
``resolve-follow-up`` resolves). ``register(app)`` adds the commands.
Imports typer and ``protocol``; never the worker.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ....protocol.store import open_store
from ..options import JsonOpt, ProjectOpt, emit_json, project_context

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


def resolve_follow_up_command(
    intent: Annotated[str, typer.Argument(
        metavar="INTENT", show_default=False,
        help="The follow-up's intentId, from `sync --hold-follow-ups --json`.")],
    token: Annotated[str, typer.Option(
        "--token", metavar="TOKEN", show_default=False,
        help="The follow-up's token, from the same sync.")],
    project: ProjectOpt = Path("."),
    as_json: JsonOpt = False,
) -> None:
    """Mark a follow-up delivered, with the token of the sync that leased it.

    Exit 2 when the token no longer holds the follow-up (its lease ran out, or
    it was resolved): it then comes again in a later sync, and a client that
    already shows it resolves it there without showing it twice.

    Example: pi-workflows resolve-follow-up ti-5072b1b79e822a607deb5dedc63b5cb7 --token 1f9c --json
    """
    settings, paths = project_context(project)
    with open_store(settings, paths.store_file) as store:
        store.resolve_turn_intent(intent, token)
    if as_json:
        emit_json({"intentId": intent, "resolved": True})
    else:
        typer.echo(f"{intent}: resolved")


def register(app: typer.Typer) -> None:
    app.command("pi-extension")(pi_extension_command)
    app.command("resolve-follow-up")(resolve_follow_up_command)
