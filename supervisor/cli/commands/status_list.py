"""The view commands: ``status`` and ``list``.

Owns parsing their arguments and printing their results: one run with its
chain, the unfinished and waiting runs, a session's run, and the filtered
listing (a table as wide as the terminal, or a line naming the filters when
nothing matches). What they report is ``supervisor.views.reports`` (shared
with the fast command line, ``supervisor.cli.main``); the lines are
``supervisor.views.status`` and ``supervisor.views.listing``.
``register(app)`` adds the commands. Must not import the worker or another
command module.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from ....protocol.clock import now_ms
from ...views.describe import describe
from ...views.listing import (
    FIXED_WIDTH,
    MAX_LIMIT,
    MAX_OFFSET,
    STATE_WORDS,
    empty_line,
    listing_lines,
)
from ...views.reports import list_data, status_data
from ...views.runref import existing_row, project_store
from ...views.status import failure_lines, status_line
from ..completion import run_ids, workflow_names
from ..options import (
    JsonOpt,
    ProjectOpt,
    SessionOpt,
    emit_json,
    project_context,
    run_text,
    session_id,
    terminal_columns,
)


def status_command(
    run: Annotated[str | None, typer.Argument(
        metavar="[RUN]", show_default=False, callback=run_text, autocompletion=run_ids,
        help="Run id, a unique prefix of it or its trailing hex part (default: every"
             " unfinished run).")] = None,
    session: SessionOpt = None,
    project: ProjectOpt = Path("."),
    as_json: JsonOpt = False,
    debug: Annotated[bool, typer.Option(
        "--debug", help="With RUN: also where its failed step raised (the recorded"
                        " traceback), as `pi-workflows --debug status RUN` does.")] = False,
    nodes: Annotated[bool, typer.Option(
        "--nodes", help="With --json: also each node of the run's workflow and its state"
                        " (done, failed, running, waiting, pending).")] = False,
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
    if run is not None and not as_json:
        with project_store(settings, paths) as store:
            row = existing_row(store, run, paths)
            lines = describe(store, row, paths.runs_dir, now_ms(), paths.project)
        if debug or os.environ.get("PI_WORKFLOWS_DEBUG") == "1":
            lines += failure_lines(paths.runs_dir, str(row.run_id))
        for line in lines:
            typer.echo(line)
        return
    data = status_data(settings, paths, run, owner, nodes=nodes)
    if as_json:
        emit_json(data)
        return
    if owner is not None:
        found = data["run"]
        typer.echo(f"session {owner}: no runs" if found is None else status_line(found, now_ms()))
        return
    for info in data["runs"]:
        typer.echo(status_line(info, now_ms()))
    if not data["runs"]:
        typer.echo("no unfinished runs and none waiting for an answer")


def _width() -> int:
    """The terminal's columns; a fixed width when there is none to go by."""
    return terminal_columns() or FIXED_WIDTH


def list_command(
    state: Annotated[str | None, typer.Option(
        "--state", metavar="STATE", show_default=False,
        help=f"Only runs in this state: {', '.join(STATE_WORDS)} (a queue state, a run"
             " status, or answered).")] = None,
    workflow: Annotated[str | None, typer.Option(
        "--workflow", metavar="NAME", show_default=False, autocompletion=workflow_names,
        help="Only runs of this workflow.")] = None,
    since: Annotated[str | None, typer.Option(
        "--since", metavar="DURATION", show_default=False,
        help="Only runs started within this long, such as 30m, 2h or 7d.")] = None,
    until: Annotated[str | None, typer.Option(
        "--until", metavar="DURATION", show_default=False,
        help="Only runs started at least this long ago (the same units as --since).")] = None,
    limit: Annotated[int | None, typer.Option(
        "--limit", metavar="N", min=1, max=MAX_LIMIT, show_default=False,
        help="At most N runs (the newest).")] = None,
    offset: Annotated[int, typer.Option(
        "--offset", metavar="N", min=0, max=MAX_OFFSET, show_default=False,
        help="Skip the newest N matching runs (with --limit: the next page).")] = 0,
    project: ProjectOpt = Path("."),
    as_json: JsonOpt = False,
) -> None:
    """List the project's runs, newest first; a chain of answers reads as one logical run.

    A table with a header, as wide as the terminal (120 columns when the
    output is not one). A continuation (the run that answered a checkpoint)
    is indented under the run it answered. --json prints the same runs,
    newest first, without the grouping.

    Example: pi-workflows list --state waiting --since 2h --limit 20 --offset 20
    """
    settings, paths = project_context(project)
    infos = list_data(settings, paths, state=state, workflow=workflow, since=since,
                      until=until, limit=limit, offset=offset)
    if as_json:
        emit_json({"runs": infos})
        return
    if not infos:
        given = [("--state", state), ("--workflow", workflow), ("--since", since),
                 ("--until", until), ("--limit", limit), ("--offset", offset or None)]
        typer.echo(empty_line([f"{name} {value}" for name, value in given if value is not None]))
        return
    for line in listing_lines(infos, now_ms(), _width()):
        typer.echo(line)


def register(app: typer.Typer) -> None:
    app.command("status")(status_command)
    app.command("list")(list_command)
