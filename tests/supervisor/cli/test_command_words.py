"""The reserved command words are exactly the names of the command table."""

from __future__ import annotations

from pi_workflows.protocol.commands import BY_NAME, COMMAND_WORDS, COMMANDS


def test_command_words_are_exactly_the_names_in_the_table() -> None:
    # A workflow named after a command would make `pi-workflows NAME` ambiguous;
    # a word with no command would refuse a name for nothing. The table is the
    # list of commands (test_command_table holds it to the command modules).
    assert tuple(entry.name for entry in COMMANDS) == COMMAND_WORDS
    assert set(BY_NAME) == set(COMMAND_WORDS)
    assert len(COMMAND_WORDS) >= 23


def test_command_words_are_unique_lowercase_words() -> None:
    assert len(set(COMMAND_WORDS)) == len(COMMAND_WORDS)
    assert all(word == word.lower() and word.strip() == word for word in COMMAND_WORDS)
