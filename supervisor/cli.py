"""The ``pi-workflows`` command line (typer).

Owns the typer app, the ``paths`` command, the one-line error contract and
exit codes. The other commands live in ``supervisor.cli_workflows`` and
``supervisor.cli_runs`` and are registered here. Imports typer,
``protocol.errors`` and the CLI modules; never the worker.
"""

from __future__ import annotations

import contextlib
import os
import sys
import traceback
from pathlib import Path
from typing import Annotated

import typer

from ..protocol.errors import ExitCode, PiWorkflowsError
from .cli_options import JsonOpt, ProjectOpt, emit_json, project_context

app = typer.Typer(
    name="pi-workflows",
    help="Durable, always-on runner for multi-step agent workflows.",
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

@app.callback()
def _root(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks on errors.")] = False,
) -> None:
    """Durable, always-on runner for multi-step agent workflows."""
    if debug:
        os.environ["PI_WORKFLOWS_DEBUG"] = "1"


@app.command()
def paths(project: ProjectOpt = Path("."), as_json: JsonOpt = False) -> None:
    """Show where the store, run bundles, host lock and logs are for a project."""
    _, resolved = project_context(project)
    data = resolved.as_json()
    if as_json:
        emit_json(data)
        return
    width = max(len(k) for k in data)
    for key, value in data.items():
        typer.echo(f"{key:<{width}}  {value}")


def _fail(message: str, code: int) -> int:
    # The terminal may be gone (a closed window): the exit code still tells.
    with contextlib.suppress(OSError):
        sys.stderr.write(f"pi-workflows: error: {message}\n")
    return code


def main(argv: list[str] | None = None) -> int:
    """Entry point: one line on stderr and a documented exit code for every error."""
    args = list(sys.argv[1:] if argv is None else argv) or ["--help"]
    debug = "--debug" in args or os.environ.get("PI_WORKFLOWS_DEBUG") == "1"
    command = typer.main.get_command(app)
    try:
        result = command.main(args=args, prog_name="pi-workflows", standalone_mode=False)
        return int(result) if isinstance(result, int) else 0
    except typer.Exit as exc:
        return int(exc.exit_code)
    except typer.Abort:
        return _fail("aborted", 130)
    except PiWorkflowsError as exc:
        if debug:
            traceback.print_exc()
        return _fail(exc.message, exc.exit_code)
    except KeyboardInterrupt:
        return _fail("interrupted", 130)
    except Exception as exc:
        # Typer's parser errors (vendored click) carry a message and an exit code:
        # bad usage, never a traceback, even with --debug.
        if hasattr(exc, "format_message") and isinstance(getattr(exc, "exit_code", None), int):
            return _fail(f"{exc.format_message()} (see --help)", ExitCode.USAGE)
        if debug:
            traceback.print_exc()
        # A bug: still one line unless --debug.
        return _fail(f"internal error ({type(exc).__name__}); rerun with --debug for details",
                     ExitCode.INTERNAL)


from .cli_workflows import register as _register_workflows  # noqa: E402

_register_workflows(app)

from .cli_runs import register as _register_runs  # noqa: E402

_register_runs(app)

from .cli_sessions import register as _register_sessions  # noqa: E402

_register_sessions(app)

from .cli_agents import register as _register_agents  # noqa: E402

_register_agents(app)

from .cli_maint import register as _register_maint  # noqa: E402

_register_maint(app)


if __name__ == "__main__":
    sys.exit(main())
