"""The ``pi-workflows`` command line (typer).

Owns the typer app (``-h``, ``--version``, shell completion), the one-line
error contract and exit codes. The commands live in
``supervisor.cli.commands``, one module per family, and are registered here.
Imports typer, ``protocol.errors`` and the CLI modules; never the worker.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer

from ...protocol.errors import ExitCode, PiWorkflowsError
from .exits import INTERRUPTED, exit_for, fail
from .options import plain_help

app = typer.Typer(
    name="pi-workflows",
    help="Durable, always-on runner for multi-step agent workflows.",
    add_completion=True,  # --install-completion / --show-completion
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
) -> None:
    """Durable, always-on runner for multi-step agent workflows.

    Example: pi-workflows run review fix the login bug
    """
    if debug:
        os.environ["PI_WORKFLOWS_DEBUG"] = "1"


def main(argv: list[str] | None = None) -> int:
    """Entry point: one line on stderr and a documented exit code for every error."""
    args = list(sys.argv[1:] if argv is None else argv) or ["--help"]
    debug = "--debug" in args or os.environ.get("PI_WORKFLOWS_DEBUG") == "1"
    command = typer.main.get_command(app)
    plain_help(command)
    try:
        result = command.main(args=args, prog_name="pi-workflows", standalone_mode=False)
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


from .commands.paths import register as _register_paths  # noqa: E402

_register_paths(app)

from .commands.workflows_validate import register as _register_workflows_validate  # noqa: E402

_register_workflows_validate(app)

from .commands.run import register as _register_run  # noqa: E402

_register_run(app)

from .commands.answer import register as _register_answer  # noqa: E402

_register_answer(app)

from .commands.cancel import register as _register_cancel  # noqa: E402

_register_cancel(app)

from .commands.resume import register as _register_resume  # noqa: E402

_register_resume(app)

from .commands.watch import register as _register_watch  # noqa: E402

_register_watch(app)

from .commands.host import register as _register_host  # noqa: E402

_register_host(app)

from .commands.status_list import register as _register_status_list  # noqa: E402

_register_status_list(app)

from .commands.start_activate import register as _register_start_activate  # noqa: E402

_register_start_activate(app)

from .commands.sync import register as _register_sync  # noqa: E402

_register_sync(app)

from .commands.chat_export import register as _register_chat_export  # noqa: E402

_register_chat_export(app)

from .commands.fork import register as _register_fork  # noqa: E402

_register_fork(app)

from .commands.logs import register as _register_logs  # noqa: E402

_register_logs(app)

from .commands.gc import register as _register_gc  # noqa: E402

_register_gc(app)

from .commands.doctor import register as _register_doctor  # noqa: E402

_register_doctor(app)

from .commands.drill import register as _register_drill  # noqa: E402

_register_drill(app)

from .commands.pi_extension import register as _register_pi_extension  # noqa: E402

_register_pi_extension(app)

from .commands.resolve_follow_up import register as _register_resolve_follow_up  # noqa: E402

_register_resolve_follow_up(app)

if __name__ == "__main__":
    sys.exit(main())
