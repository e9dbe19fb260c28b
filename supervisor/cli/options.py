"""What every CLI command shares: options, settings, run input, JSON output.

Owns the --project, --json, --session and --input-* options, the RUN argument
and printing JSON; reading a run's input is ``supervisor.session.runinput`` (shared
with the fast command line). Imports typer, ``protocol``,
``supervisor.session.runinput``, ``cli.exits`` (the error of a missing session) and
``cli.completion`` (what a TAB offers for a RUN or a NAME).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperArgument

from ...protocol.leansettings import current_settings
from ...protocol.limits import validate_run_id, validate_session_id
from ...protocol.paths import Paths, resolve_paths
from ...protocol.settingspec import SettingsLike
from ..session.runinput import json_input, parse_input
from . import completion
from .exits import session_required

__all__ = ["json_input", "parse_input"]  # read here by the commands (supervisor.session.runinput)

# Every option and argument names its metavar: typer's default shows Python
# types (<list[str]>, {file}) to people.
ProjectOpt = Annotated[
    Path,
    typer.Option("--project", metavar="DIR", show_default=False,
                 help="Project directory (default: the current directory)."),
]


def run_text(value: str | None) -> str | None:
    """A RUN argument is checked as it is parsed: a bad id is refused before any store opens."""
    return None if value is None else validate_run_id(value)


NameArg = Annotated[str, typer.Argument(
    metavar="NAME", autocompletion=completion.workflow_names,
    help="Workflow name (see `pi-workflows workflows`).")]
TaskArg = Annotated[list[str] | None, typer.Argument(
    metavar="[TASK]...", show_default=False,
    help="Task words; they become the input {\"task\": \"...\"}.")]
RunArg = Annotated[str, typer.Argument(
    metavar="RUN", show_default=False, callback=run_text, autocompletion=completion.run_ids,
    help="Run id, a unique prefix of it, or its trailing hex part (`pi-workflows list`).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]
SessionOpt = Annotated[str | None, typer.Option(
    "--session", envvar="PI_WORKFLOWS_SESSION", show_default=False, metavar="ID",
    help="The session this command acts for (or PI_WORKFLOWS_SESSION); a session has at"
         " most one active run and catches up with `sync`.")]
ByAgentOpt = Annotated[bool, typer.Option(
    "--by-agent", help="The session's model asked for this (the Pi extension's `workflow` tool):"
                       " how the run ends later gives that model one turn.")]
InputJsonOpt = Annotated[str | None, typer.Option(
    "--input-json", metavar="JSON", help="The input as JSON text.", show_default=False)]
InputFileOpt = Annotated[str | None, typer.Option(
    "--input-file", metavar="FILE", show_default=False,
    help="The input as a JSON file (- reads standard input); up to 1 MiB.")]


class _PlainArgument(TyperArgument):
    """An argument shown as its metavar alone (typer adds a type: ``RUN <str>``, ``{RUN}``)."""

    def display_type_rich(self, ctx: typer.Context) -> str:  # type: ignore[override]
        return ""

    def get_usage_pieces(self, ctx: typer.Context) -> list[str]:  # type: ignore[override]
        return [self.metavar or (self.name or "").upper()]


def plain_help(command: object) -> None:
    """Show every argument of ``command`` and its subcommands by its metavar alone."""
    for param in getattr(command, "params", []):
        if type(param) is TyperArgument:
            param.__class__ = _PlainArgument
    for sub in getattr(command, "commands", {}).values():
        plain_help(sub)


def project_context(project: Path | None) -> tuple[SettingsLike, Paths]:
    settings = current_settings()  # pydantic only for the unusual cases
    return settings, resolve_paths(settings, project or Path.cwd())


def terminal_columns() -> int | None:
    """The terminal's columns (``COLUMNS`` first, as shells set it), or None when
    standard output is not a terminal and ``COLUMNS`` says nothing."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isascii() and columns.isdigit() and int(columns) > 0:
        return int(columns)
    if sys.stdout.isatty():
        with contextlib.suppress(OSError, ValueError):
            return os.get_terminal_size(sys.stdout.fileno()).columns
    return None


def emit_json(value: Any) -> None:
    typer.echo(json.dumps(value, indent=2, sort_keys=True))


def session_id(value: str | None) -> str | None:
    return None if value is None else validate_session_id(value)


def required_session(value: str | None, command: str) -> str:
    """The session ``command`` acts for (``start``, ``activate``, ``sync``): it has to have one."""
    checked = session_id(value)
    if checked is None:
        raise session_required(command)
    return checked
