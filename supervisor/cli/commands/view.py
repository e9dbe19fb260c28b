"""The ``view``command (placeholder while issue 25 lands). Must not import the worker
or another command module.
"""

from __future__ import annotations

import typer

from ....protocol.errors import UsageError


def view_command() -> None:
    """Not available yet.

    Example: pi-workflows view --help
    """
    raise UsageError("`view` is not available yet", code="not_available")


def register(app: typer.Typer) -> None:
    app.command("view")(view_command)
