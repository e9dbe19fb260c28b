"""The ``answer`` command: answer a run waiting at a checkpoint.

Owns parsing ``answer``'s arguments and printing its result; the answer
itself (a continuation run queued for the host) is
``supervisor.session.actions``, shared with the fast command line.
``register(app)`` adds the command. Must not import the worker or another
command module.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ...session import actions
from ..options import (
    InputFileOpt,
    InputJsonOpt,
    JsonOpt,
    ProjectOpt,
    RunArg,
    SessionOpt,
    emit_json,
    project_context,
    session_id,
)


def answer_command(
    run: RunArg,
    text: Annotated[list[str] | None, typer.Argument(
        metavar="[TEXT]...", help="The answer as words (a string).", show_default=False)] = None,
    input_json: InputJsonOpt = None,
    input_file: InputFileOpt = None,
    force: Annotated[bool, typer.Option(
        "--force", help="Continue even though the workflow definition changed.")] = False,
    session: SessionOpt = None,
    project: ProjectOpt = Path("."),
    as_json: JsonOpt = False,
) -> None:
    """Answer a run waiting at a checkpoint: queues a continuation run for the host.

    With --session, the continuation's notifications go to that session. A
    run is answered once: a second answer names the continuation it has.

    A human decision takes only its answers (`status RUN` lists them): a
    choice by its label (pi-workflows answer RUN approve), a text input by its
    name and then the text (pi-workflows answer RUN comment fix the typo), or
    --input-json '{"choice": "comment", "text": "..."}'. Anything else is
    refused (exit 2) and nothing is queued. --json names the chosen label.

    Example: pi-workflows answer 99624cea yes, ship it
    """
    settings, paths = project_context(project)
    owner = session_id(session)
    answer = actions.answer_value(text, input_json, input_file)
    run, row, given = actions.answer(settings, paths, run, answer, force=force, owner=owner)
    if as_json:
        emit_json(actions.answer_json(run, row, given))
    else:
        typer.echo(row.run_id)


def register(app: typer.Typer) -> None:
    app.command("answer")(answer_command)
