"""The view commands: ``status`` and ``list``.

Owns parsing their arguments and printing their results: one run with its
chain, the unfinished and waiting runs, a session's run, and the filtered
listing. The views themselves are ``supervisor.views`` and
``supervisor.listing``. ``register(app)`` adds the commands. Never imports
the worker.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from ..protocol.clock import now_ms
from ..protocol.states import TERMINAL
from ..protocol.store import open_store
from .cli_options import (
    JsonOpt,
    ProjectOpt,
    SessionOpt,
    emit_json,
    project_context,
    run_text,
    session_id,
)
from .listing import STATE_WORDS, check_state, listing_lines, select
from .runref import existing_row, project_store
from .timefmt import parse_duration
from .views import chain_lines, run_status, status_line, status_with_chain


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
    with project_store(settings, paths) as store:
        if run is not None:
            info = status_with_chain(store, existing_row(store, run, paths), paths.runs_dir)
            if as_json:
                emit_json(info)
                return
            for line in [status_line(info, now_ms()), *chain_lines(info)]:
                typer.echo(line)
            return
        if owner is not None:
            mine = store.session_run(owner)
            found = None if mine is None else run_status(mine, paths.runs_dir)
            if as_json:
                emit_json({"session": owner, "run": found})
            else:
                typer.echo(f"session {owner}: no runs" if found is None
                           else status_line(found, now_ms()))
            return
        # Unfinished runs, and runs that wait for an answer (done in the queue).
        rows = [r for r in store.list_runs() if r.state not in TERMINAL]
        rows += store.waiting_runs()
        rows.sort(key=lambda r: (r.created_at, r.run_id))
        forks = store.forks_of([r.run_id for r in rows])
        infos = [run_status(r, paths.runs_dir, forks.get(r.run_id)) for r in rows]
    if as_json:
        emit_json({"runs": infos})
    else:
        for info in infos:
            typer.echo(status_line(info, now_ms()))
        if not infos:
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
    check_state(state)
    since_ms = None if since is None else now_ms() - int(parse_duration(since, "--since") * 1000)
    if not paths.store_file.exists():
        infos: list[dict[str, Any]] = []
    else:
        with open_store(settings, paths.store_file) as store:
            infos = select(store, paths.runs_dir, state=state, workflow=workflow,
                           since_ms=since_ms, limit=limit)
    if as_json:
        emit_json({"runs": infos})
        return
    for line in listing_lines(infos, now_ms()):
        typer.echo(line)


def register(app: typer.Typer) -> None:
    app.command("status")(status_command)
    app.command("list")(list_command)
