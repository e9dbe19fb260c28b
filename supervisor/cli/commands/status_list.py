"""The view commands: ``status`` and ``list``.

Owns parsing their arguments and printing their results: one run with its
chain, the unfinished and waiting runs, a session's run, and the filtered
listing. What they report is ``supervisor.views.reports`` (shared with the fast
command line, ``supervisor.cli.main``); the lines are ``supervisor.views.status``
and ``supervisor.views.listing``. ``register(app)`` adds the commands. Must not import
the worker or another command module.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ....protocol.clock import now_ms
from ...views.listing import STATE_WORDS, listing_lines
from ...views.reports import list_data, status_data
from ...views.status import chain_lines, status_line
from ..options import (
    JsonOpt,
    ProjectOpt,
    SessionOpt,
    emit_json,
    project_context,
    run_text,
    session_id,
)


def status_command(
    run: Annotated[str | None, typer.Argument(
        metavar="[RUN]", show_default=False, callback=run_text,
        help="Run id, a unique prefix of it or its trailing hex part (default: every"
             " unfinished run).")] = None,
    session: SessionOpt = None,
    project: ProjectOpt = Path("."),
    as_json: JsonOpt = False,
) -> None:
    """Show a run's state: from the queue (even before it has a bundle) and its bundle.

    Without RUN: every unfinished run and every run waiting for an answer, or
    with --session that session's reservation (or else its latest run). A run
    answered at a checkpoint reads `answered -> CONTINUATION`; a run in a
    chain of answers also lists the chain, root first.

    Example: pi-workflows status 99624cea
    """
    settings, paths = project_context(project)
    owner = session_id(session)
    data = status_data(settings, paths, run, owner)
    if as_json:
        emit_json(data)
        return
    if run is not None:
        held = [f"  waits: {data['heldBy']['text']}"] if data.get("heldBy") else []
        for line in [status_line(data, now_ms()), *held, *chain_lines(data)]:
            typer.echo(line)
        return
    if owner is not None:
        found = data["run"]
        typer.echo(f"session {owner}: no runs" if found is None else status_line(found, now_ms()))
        return
    for info in data["runs"]:
        typer.echo(status_line(info, now_ms()))
    if not data["runs"]:
        typer.echo("no unfinished runs and none waiting for an answer")


def list_command(
    state: Annotated[str | None, typer.Option(
        "--state", metavar="STATE", show_default=False,
        help=f"Only runs in this state: {', '.join(STATE_WORDS)} (a queue state, a run"
             " status, or answered).")] = None,
    workflow: Annotated[str | None, typer.Option(
        "--workflow", metavar="NAME", show_default=False,
        help="Only runs of this workflow.")] = None,
    since: Annotated[str | None, typer.Option(
        "--since", metavar="DURATION", show_default=False,
        help="Only runs started within this long, such as 30m, 2h or 7d.")] = None,
    limit: Annotated[int | None, typer.Option(
        "--limit", metavar="N", min=1, show_default=False,
        help="At most N runs (the newest).")] = None,
    project: ProjectOpt = Path("."),
    as_json: JsonOpt = False,
) -> None:
    """List the project's runs, newest first; a chain of answers reads as one logical run.

    A continuation (the run that answered a checkpoint) is indented under the
    run it answered. --json prints the same runs, newest first, without the
    grouping.

    Example: pi-workflows list --state waiting --since 2h
    """
    settings, paths = project_context(project)
    infos = list_data(settings, paths, state=state, workflow=workflow, since=since, limit=limit)
    if as_json:
        emit_json({"runs": infos})
        return
    for line in listing_lines(infos, now_ms()):
        typer.echo(line)


def register(app: typer.Typer) -> None:
    app.command("status")(status_command)
    app.command("list")(list_command)
