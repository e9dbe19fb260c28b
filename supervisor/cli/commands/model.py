"""The ``model`` command: ``model serve``, a scripted model to try agent steps offline.

Owns parsing ``model serve``'s options (the script file, the port, where
the Pi agent directory for it goes: by default the project's state
directory) and printing its last line; serving is ``supervisor.model.serve``.
``register(app)`` adds the command. Imports typer, ``protocol.errors``, the
CLI's options and the scripted model server; must not import the worker or
another command module.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ....protocol.errors import UsageError
from ..options import ProjectOpt, project_context

ACTIONS = ("serve",)


def model_command(
    action: Annotated[str, typer.Argument(
        metavar="ACTION", show_default=False,
        help="serve: answer Pi's model requests from a script until Ctrl-C.")],
    script: Annotated[Path | None, typer.Option(
        "--script", metavar="FILE", show_default=False,
        help="A JSON file of scripted replies (docs/agents.md); default: submit an output"
             " that fits each step's schema.")] = None,
    port: Annotated[int, typer.Option(
        "--port", metavar="N", help="The port on 127.0.0.1 (0: any free one).")] = 0,
    agent_dir: Annotated[Path | None, typer.Option(
        "--agent-dir", metavar="DIR", show_default=False,
        help="Where to write the Pi agent directory pointing at the server (default: in"
             " the project's state directory).")] = None,
    project: ProjectOpt = Path("."),
) -> None:
    """Serve a scripted OpenAI-compatible model on 127.0.0.1 for offline agent steps.

    Prints the URL and the Pi settings to use (PI_WORKFLOWS_PI_AGENT_DIR, or a
    models.json entry), then answers every workflow step's model requests
    until Ctrl-C or SIGTERM (exit 0). A bad script file: one line, exit 2.

    Example: pi-workflows model serve --port 8765
    """
    if action not in ACTIONS:
        raise UsageError(f"model {action}: unknown action; use {', '.join(ACTIONS)}")
    from ...model.serve import AGENT_DIR_NAME, serve

    if agent_dir is None:
        _, paths = project_context(project)
        target = paths.state_dir / AGENT_DIR_NAME
    else:
        target = agent_dir.expanduser().absolute()
    answered = serve(script=script, port=port, agent_dir=target, echo=typer.echo)
    typer.echo(f"pi-workflows model serve: stopped after {answered} model request(s)")


def register(app: typer.Typer) -> None:
    app.command("model")(model_command)
