"""The reserved command words are exactly the commands the CLI registers."""

from __future__ import annotations

import typer
from pi_workflows.protocol.commands import COMMAND_WORDS
from pi_workflows.supervisor.cli.app import app


def test_command_words_are_exactly_the_cli_commands() -> None:
    # A command added without its word would let a workflow take the same
    # name, and a word without a command would refuse a name for nothing.
    group = typer.main.get_command(app)
    registered = set(getattr(group, "commands", {}))
    assert len(registered) >= 16  # the app really was built with its commands
    assert registered <= set(COMMAND_WORDS), sorted(registered - set(COMMAND_WORDS))
    missing = set(COMMAND_WORDS) - registered
    assert not missing, f"reserved words with no command: {sorted(missing)}"


def test_command_words_are_unique_lowercase_words() -> None:
    assert len(set(COMMAND_WORDS)) == len(COMMAND_WORDS)
    assert all(word == word.lower() and word.strip() == word for word in COMMAND_WORDS)
