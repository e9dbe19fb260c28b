"""The ``resolve-follow-up`` command: the second step of the two-step follow-up delivery.

Owns marking a follow-up delivered with the token of the sync that leased
it (``sync --hold-follow-ups`` leases, the client delivers, this resolves);
the lease is the store's (``resolve_turn_intent``), and the fast command
line does the same. ``register(app)`` adds the command. Must not import the
worker or another command module.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ....protocol.store import open_store
from ..options import JsonOpt, ProjectOpt, emit_json, project_context


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
    app.command("resolve-follow-up")(resolve_follow_up_command)
