"""The ``ui`` command: a local web dashboard of the project's runs.

Owns parsing ``ui``'s arguments and the one line said when the ``ui``
extra (Starlette, uvicorn) is missing; serving is ``supervisor.web.server``.
``register(app)`` adds the command. Must not import the worker or another
command module.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from ....protocol.errors import UsageError
from ..options import ProjectOpt, project_context

MISSING = "pi-workflows ui needs the ui extra: pip install 'pi-workflows[ui]'"


def ui_command(
    port: Annotated[int, typer.Option(
        "--port", min=0, max=65535, metavar="N",
        help="The port on 127.0.0.1 (0, the default, picks a free one).")] = 0,
    open_browser: Annotated[bool, typer.Option(
        "--open", help="Open the dashboard in the default browser.")] = False,
    actions: Annotated[bool, typer.Option(
        "--actions", help="Allow answering, cancelling, resuming and forking runs from the"
                          " page (read-only without it).")] = False,
    url_file: Annotated[Path | None, typer.Option(
        "--url-file", hidden=True, help="Also write the URL to this file (0600).")] = None,
    project: ProjectOpt = Path("."),
) -> None:
    """Serve a local web dashboard of the project's runs, live, on 127.0.0.1.

    Prints one line, the URL with a random token (open it; the token then
    lives in a cookie). Requests without the token, or from another Host or
    Origin, are refused. Read-only unless --actions. Ctrl-C stops it.

    Example: pi-workflows ui --open

    Example: pi-workflows ui --port 8765 --actions
    """
    try:
        from ...web.server import serve
    except ImportError as exc:
        if exc.name is not None and exc.name.split(".")[0] in {"starlette", "uvicorn", "anyio"}:
            raise UsageError(MISSING, code="missing_extra") from None
        raise
    settings, paths = project_context(project)

    def say(line: str) -> None:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    raise typer.Exit(serve(settings, paths, port=port, actions=actions,
                           open_browser=open_browser, say=say, url_file=url_file))


def register(app: typer.Typer) -> None:
    app.command("ui")(ui_command)
