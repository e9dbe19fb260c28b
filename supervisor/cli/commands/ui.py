"""The ``ui``command (placeholder while issue 25 lands). Must not import the worker
or another command module.
"""

from __future__ import annotations

import typer

from ....protocol.errors import UsageError


def ui_command() -> None:
    """Not available yet.

    Example: pi-workflows ui --help
    """
    raise UsageError("`ui` is not available yet", code="not_available")


def register(app: typer.Typer) -> None:
    app.command("ui")(ui_command)
