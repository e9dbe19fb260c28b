"""The ``pi-workflows`` command line (typer).

Owns the typer app (``-h``, ``--version``, ``--debug``, the shell
completion options of ``cli.completion``),
the one-line error contract and exit codes. Its commands are the command
table's (``protocol.commands``), one module per family in
``supervisor.cli.commands``, each imported only when its command is used
(``cli.lazy``). Imports typer, ``protocol.errors``, ``cli.exits``,
``cli.completion`` and ``cli.lazy``; no command module, and never the worker.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer

from ...protocol.errors import ExitCode, PiWorkflowsError
from . import completion
from .exits import INTERRUPTED, exit_for, fail
from .lazy import LazyGroup

app = typer.Typer(
    name="pi-workflows",
    cls=LazyGroup,
    help="Durable, always-on runner for multi-step agent workflows.",
    add_completion=False,  # ours take the shell: cli.completion
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"pi-workflows {version('pi-workflows')}")
        except PackageNotFoundError:  # run from a source tree that is not installed
            from ... import __version__

            typer.echo(f"pi-workflows {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks on errors.")] = False,
    _show_version: Annotated[bool, typer.Option(
        "--version", callback=_version, is_eager=True, expose_value=True,
        help="Print the version and exit.")] = False,
    _install: Annotated[str | None, typer.Option(
        "--install-completion", metavar="[SHELL]", callback=completion.install, is_eager=True,
        show_default=False,
        help="Install completion for SHELL (bash, zsh or fish; default: this shell).")] = None,
    _show: Annotated[str | None, typer.Option(
        "--show-completion", metavar="[SHELL]", callback=completion.show, is_eager=True,
        show_default=False,
        help="Print the completion script for SHELL, to copy it or install it by hand.")] = None,
) -> None:
    """Durable, always-on runner for multi-step agent workflows.

    Example: pi-workflows run review fix the login bug
    """
    if debug:
        os.environ["PI_WORKFLOWS_DEBUG"] = "1"


def main(argv: list[str] | None = None) -> int:
    """Entry point: one line on stderr and a documented exit code for every error."""
    args = completion.with_shell(list(sys.argv[1:] if argv is None else argv) or ["--help"])
    completion.prepare()
    debug = "--debug" in args or os.environ.get("PI_WORKFLOWS_DEBUG") == "1"
    command = typer.main.get_command(app)
    try:
        # The words as typed reach the commands (``host`` tells its words for pi
        # from stray ones only by where ``--`` stood).
        result = command.main(args=args, prog_name="pi-workflows", standalone_mode=False,
                              obj={"argv": list(args)})
        return int(result) if isinstance(result, int) else 0
    except typer.Exit as exc:
        return int(exc.exit_code)
    except typer.Abort:
        return fail("aborted", INTERRUPTED)
    except (PiWorkflowsError, KeyboardInterrupt) as exc:
        return exit_for(exc, debug=debug)
    except Exception as exc:
        # Typer's parser errors (vendored click) carry a message and an exit code:
        # bad usage, never a traceback, even with --debug.
        if hasattr(exc, "format_message") and isinstance(getattr(exc, "exit_code", None), int):
            return fail(f"{exc.format_message()} (see --help)", ExitCode.USAGE)
        return exit_for(exc, debug=debug)


if __name__ == "__main__":
    sys.exit(main())
