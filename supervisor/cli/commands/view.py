"""The ``view`` command: browse a project's runs in the terminal.

Owns parsing ``view``'s arguments and choosing how to show them: the
full-screen app (``supervisor.tui.app``, loaded only then, so textual is
needed only there) on a terminal, else one snapshot as plain text
(``supervisor.tui.text``). What is shown comes from
``supervisor.views.stream``; a RUN is resolved by ``supervisor.views.runref``
as every command resolves one. A view only: it changes nothing.
``register(app)`` adds the command. Must not import the worker or another
command module.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Annotated

import typer

from ....protocol.errors import UsageError
from ....protocol.store import open_store, store_present
from ...tui.text import list_text, run_text
from ...views.listing import STATE_WORDS, check_state
from ...views.runref import resolve_run
from ...views.stream import ListQuery, ViewStream
from ..completion import run_ids, workflow_names
from ..options import JsonOpt, ProjectOpt, emit_json, project_context
from ..options import run_text as checked_run

UI_EXTRA = "pi-workflows view needs the ui extra: pip install 'pi-workflows[ui]'"
TEXT_WIDTH = 100  # a snapshot's width when there is no terminal to measure


def stdout_is_terminal() -> bool:
    """The app needs a terminal both ways: keys come from stdin (``view < /dev/null``
    in a terminal would paint an app that nothing can quit)."""
    return os.isatty(1) and os.isatty(0)


def _textual_missing() -> bool:
    try:
        import textual  # noqa: F401  (only whether it imports)
    except ImportError:
        return True
    return False


def view_command(
    run: Annotated[str | None, typer.Argument(
        metavar="[RUN]", show_default=False, callback=checked_run, autocompletion=run_ids,
        help="Open straight on this run: its id, a unique prefix or its trailing hex part.")
    ] = None,
    once: Annotated[bool, typer.Option(
        "--once", help="Print one snapshot as plain text and exit (also without a terminal).")
    ] = False,
    state: Annotated[str | None, typer.Option(
        "--state", metavar="STATE", show_default=False,
        help=f"Start the list filtered to this state: {', '.join(STATE_WORDS)}.")] = None,
    workflow: Annotated[str | None, typer.Option(
        "--workflow", metavar="NAME", show_default=False, autocompletion=workflow_names,
        help="Start the list filtered to this workflow.")] = None,
    project: ProjectOpt = Path("."),
    as_json: JsonOpt = False,
) -> None:
    """Browse runs in the terminal: the list, a run's graph and steps, replay (view only).

    On a terminal it opens a full-screen app (keys shown at the bottom: Enter
    opens a run, s/w/slash filter, left/right replay a run's history, q goes
    back). Without a terminal, or with --once, it prints one snapshot as text;
    --json prints that snapshot as the view stream's document instead.

    Example: pi-workflows view 99624cea --once
    """
    settings, paths = project_context(project)
    query = ListQuery(state=check_state(state), workflow=workflow).checked()
    run_id = None
    if run is not None:
        if store_present(settings, paths.store_file):
            with open_store(settings, paths.store_file) as store:
                run_id = resolve_run(store, run, paths)
        else:
            run_id = resolve_run(None, run, paths)
    stream = ViewStream(settings, paths)
    if as_json:  # the document itself (docs/view-stream.md), for scripts
        emit_json(stream.list_doc(query) if run_id is None else stream.run_doc(run_id))
        return
    if once or not stdout_is_terminal():
        width = shutil.get_terminal_size((TEXT_WIDTH, 24)).columns
        text = (list_text(stream.list_doc(query), width) if run_id is None
                else run_text(stream.run_doc(run_id), width))
        typer.echo(text)
        return
    if _textual_missing():
        raise UsageError(UI_EXTRA, code="ui_extra_missing")
    from ...tui.app import ViewerApp

    ViewerApp(stream, query, run_id).run()


def register(app: typer.Typer) -> None:
    app.command("view")(view_command)
