"""The ``graph``command (placeholder while issue 25 lands). Must not import the worker
or another command module.
"""

from __future__ import annotations

import typer

from ....protocol.errors import UsageError


def graph_command() -> None:
    """Not available yet.

    Example: pi-workflows graph --help
    """
    raise UsageError("`graph` is not available yet", code="not_available")


def register(app: typer.Typer) -> None:
    app.command("graph")(graph_command)
