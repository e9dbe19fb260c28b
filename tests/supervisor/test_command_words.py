"""Every command the CLI registers is a reserved command word."""

from __future__ import annotations

import typer
from pi_workflows.protocol.commands import COMMAND_WORDS
from pi_workflows.supervisor.cli import app


def test_every_cli_command_is_in_command_words() -> None:
    # A command added without reserving its word would let a workflow take
    # the same name, and `pi-workflows NAME` would mean two things.
    group = typer.main.get_command(app)
    registered = set(getattr(group, "commands", {}))
    assert len(registered) >= 11  # the app really was built with its commands
    assert registered <= set(COMMAND_WORDS), sorted(registered - set(COMMAND_WORDS))


def test_command_words_are_unique_lowercase_words() -> None:
    assert len(set(COMMAND_WORDS)) == len(COMMAND_WORDS)
    assert all(word == word.lower() and word.strip() == word for word in COMMAND_WORDS)
