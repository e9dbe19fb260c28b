"""The typer app's group of commands, read from the command table and imported lazily.

Owns ``LazyGroup``, the ``cls`` of the ``pi-workflows`` typer app: its
commands are the entries of ``protocol.commands.COMMANDS``. Listing them,
the root ``--help`` (each with the table's summary), completing a command's
name and suggesting one for a typo read the table alone; looking a command
up (to run it, or to show its own help) imports its module under
``cli.commands``, and only that one, whose ``register(app)`` defines it on
an app of its own. Imports typer and ``protocol.commands``; a command module
only by its name, through importlib.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping, MutableMapping
from typing import Any

import typer

# typer vendors click: these are the classes its TyperGroup is built on.
from typer._click import Command, Context, HelpFormatter
from typer._click.shell_completion import CompletionItem
from typer.core import TyperGroup

from ...protocol.commands import BY_NAME

PACKAGE = "pi_workflows.supervisor.cli.commands"


def load_module(module: str) -> dict[str, Command]:
    """The click commands that ``module`` (under ``cli.commands``) defines, by name."""
    # Every command module imports options already; the root --help, which
    # imports no command module, must not pay for its settings model.
    from .options import plain_help

    # The root app's display settings, so a command reads as it would had it
    # been registered on the root app itself.
    scratch = typer.Typer(rich_markup_mode=None, pretty_exceptions_enable=False)
    importlib.import_module(f"{PACKAGE}.{module}").register(scratch)
    commands = dict(typer.main.get_group(scratch).commands)
    for command in commands.values():
        plain_help(command)
    return commands


class LazyCommands(MutableMapping[str, Command]):
    """A group's commands by name: every name of the table, loaded when first looked up.

    Iterating and ``in`` import nothing; getting a command imports its
    module. Commands added by ``add_command`` come after the table's.
    """

    def __init__(self, added: Mapping[str, Command]) -> None:
        self._loaded: dict[str, Command] = dict(added)

    def __getitem__(self, name: str) -> Command:
        if name not in self._loaded and name in BY_NAME:
            for defined, command in load_module(BY_NAME[name].module).items():
                self._loaded.setdefault(defined, command)
        return self._loaded[name]

    def __setitem__(self, name: str, command: Command) -> None:
        self._loaded[name] = command

    def __delitem__(self, name: str) -> None:
        del self._loaded[name]

    def __contains__(self, name: object) -> bool:
        return name in BY_NAME or name in self._loaded

    def __iter__(self) -> Iterator[str]:
        yield from BY_NAME
        yield from (name for name in self._loaded if name not in BY_NAME)

    def __len__(self) -> int:
        return len(BY_NAME) + sum(name not in BY_NAME for name in self._loaded)


class LazyGroup(TyperGroup):
    """The root group: the table's commands, each module imported only when its command is."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.commands = LazyCommands(self.commands)

    def list_commands(self, ctx: Context) -> list[str]:
        return list(self.commands)  # the table's order

    def get_command(self, ctx: Context, cmd_name: str) -> Command | None:
        return self.commands.get(cmd_name)

    def _summary(self, name: str) -> str:
        entry = BY_NAME.get(name)
        return entry.summary if entry is not None else self.commands[name].get_short_help_str()

    def format_commands(self, ctx: Context, formatter: HelpFormatter) -> None:
        rows = [(name, self._summary(name)) for name in self.list_commands(ctx)]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def shell_complete(self, ctx: Context, incomplete: str) -> list[CompletionItem]:
        items = [CompletionItem(name, help=self._summary(name))
                 for name in self.list_commands(ctx) if name.startswith(incomplete)]
        # Past TyperGroup's, whose command names come from loading every command:
        # click's own completes the root's options.
        items.extend(super(TyperGroup, self).shell_complete(ctx, incomplete))
        return items
