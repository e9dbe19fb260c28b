"""What every CLI command shares: options, settings, run input, JSON output.

Owns the --project, --json, --session and --input-* options, the RUN argument, reading a run's
input from words, JSON text or a file (``-``: standard input) within the
input limit, and printing JSON. Imports typer and ``protocol`` only.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperArgument

from ..protocol.errors import LimitError, UsageError
from ..protocol.limits import MAX_PRIVATE_INPUT_BYTES, validate_run_id, validate_session_id
from ..protocol.settings import Paths, Settings, load_settings, resolve_paths

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


RunArg = Annotated[str, typer.Argument(
    metavar="RUN", show_default=False, callback=run_text,
    help="Run id, a unique prefix of it, or its trailing hex part (`pi-workflows list`).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]
SessionOpt = Annotated[str | None, typer.Option(
    "--session", envvar="PI_WORKFLOWS_SESSION", show_default=False, metavar="ID",
    help="The session this command acts for (or PI_WORKFLOWS_SESSION); a session has at"
         " most one active run and catches up with `sync`.")]
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


def project_context(project: Path | None) -> tuple[Settings, Paths]:
    settings = load_settings()
    return settings, resolve_paths(settings, project or Path.cwd())


def emit_json(value: Any) -> None:
    typer.echo(json.dumps(value, indent=2, sort_keys=True))


def session_id(value: str | None) -> str | None:
    return None if value is None else validate_session_id(value)


def _read_file(path: str) -> str:
    """The file's text, refusing more than the input limit before reading it all."""
    try:
        if path == "-":
            data = sys.stdin.buffer.read(MAX_PRIVATE_INPUT_BYTES + 1)
        else:
            with open(path, "rb") as fh:
                data = fh.read(MAX_PRIVATE_INPUT_BYTES + 1)
    except OSError as exc:
        raise UsageError(f"cannot read --input-file {path}: {exc.strerror or exc}",
                         code="input_invalid") from None
    if len(data) > MAX_PRIVATE_INPUT_BYTES:
        raise LimitError(f"--input-file {path} is larger than {MAX_PRIVATE_INPUT_BYTES} bytes",
                         code="input_too_large")
    try:
        return data.decode()
    except UnicodeDecodeError:
        raise UsageError(f"--input-file {path} is not UTF-8 text", code="input_invalid") from None


def _parse_json(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        # The position, never the text: input may be private.
        raise UsageError(f"{where} is not valid JSON: {exc.msg} at position {exc.pos}",
                         code="input_invalid") from None
    except RecursionError:
        raise UsageError(f"{where} is nested too deeply", code="input_invalid") from None
    except ValueError:  # an integer too long to read (more than 4,300 digits)
        raise UsageError(f"{where} has a number too long to read; give it as a string",
                         code="input_invalid") from None


def json_input(input_json: str | None, input_file: str | None) -> tuple[bool, Any]:
    """(given, value) of --input-json / --input-file; both at once is a usage error."""
    if input_json is not None and input_file is not None:
        raise UsageError("give either --input-json or --input-file, not both")
    if input_json is not None:
        return True, _parse_json(input_json, "--input-json")
    if input_file is not None:
        return True, _parse_json(_read_file(input_file), f"--input-file {input_file}")
    return False, None


def parse_input(task: list[str] | None, input_json: str | None,
                input_file: str | None = None) -> Any:
    """JSON input if given; otherwise trailing words become ``{"task": ...}``."""
    given, value = json_input(input_json, input_file)
    if given:
        if task:
            raise UsageError("give either TASK words or --input-json/--input-file, not both")
        return value
    return {"task": " ".join(task)} if task else {}
