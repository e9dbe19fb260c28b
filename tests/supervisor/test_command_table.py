"""The command table (``protocol.commands``) and the command modules agree.

Every entry names a module under ``supervisor.cli.commands`` that defines a
command of that name, and each module defines exactly its entries: nothing
is registered anywhere else, so a command missing from the table could not
be run, listed or reserved as a word.
"""

from __future__ import annotations

import importlib
from collections import defaultdict
from pathlib import Path

import pytest
import typer
from pi_workflows.protocol.commands import COMMANDS

COMMANDS_DIR = Path(__file__).resolve().parents[2] / "supervisor" / "cli" / "commands"
PACKAGE = "pi_workflows.supervisor.cli.commands"


def _by_module() -> dict[str, set[str]]:
    names: dict[str, set[str]] = defaultdict(set)
    for entry in COMMANDS:
        names[entry.module].add(entry.name)
    return dict(names)


def _defined(module: str) -> dict[str, object]:
    """The click commands ``module`` defines, built on an app of their own."""
    scratch = typer.Typer()
    importlib.import_module(f"{PACKAGE}.{module}").register(scratch)
    return dict(typer.main.get_group(scratch).commands)


@pytest.mark.parametrize("module", sorted(_by_module()))
def test_each_module_defines_exactly_its_entries(module: str) -> None:
    defined = _defined(module)
    assert set(defined) == _by_module()[module]
    for name, command in defined.items():
        assert getattr(command, "name", None) == name


def test_every_command_module_is_in_the_table() -> None:
    # A module no entry names is dead code, or a command nobody can run.
    modules = {path.stem for path in COMMANDS_DIR.glob("*.py") if path.stem != "__init__"}
    assert modules == set(_by_module())


def test_summaries_are_one_short_line() -> None:
    # --help shows each on one line beside the longest name (80 columns).
    for entry in COMMANDS:
        assert entry.summary.strip() == entry.summary and "\n" not in entry.summary
        assert entry.summary.endswith(".") and len(entry.summary) <= 57, entry.name
