"""The ``host`` command: the supervisor of a project's runs.

Owns parsing its arguments and printing its start-up banner and results;
the work is done by the host (``supervisor.host.loop``), its server
(``supervisor.host.serve``) and, for ``--background`` and ``--stop``,
``supervisor.host.background``. ``register(app)`` adds the command. Must not
import the worker or another command module.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ....protocol.errors import UsageError
from ....protocol.paths import Paths
from ....protocol.settingspec import SettingsLike
from ...host.background import (
    START_TIMEOUT_S,
    STOP_MARGIN_S,
    host_argv,
    start_background,
    stop_host,
)
from ...host.foreground import MAX_CONCURRENCY, MIN_CONCURRENCY, run_foreground
from ..options import JsonOpt, ProjectOpt, emit_json, project_context


def host_command(
    ctx: typer.Context,
    project: ProjectOpt = Path("."),
    concurrency: Annotated[int | None, typer.Option(
        "--concurrency", min=MIN_CONCURRENCY, max=MAX_CONCURRENCY, metavar="N",
        help="Runs executed at once (default: the setting, else the number of CPUs).")] = None,
    background: Annotated[bool, typer.Option(
        "--background", help="Start it detached from this terminal (its output in"
                             " <logDir>/host.log); return once it is ready.")] = False,
    stop: Annotated[bool, typer.Option(
        "--stop", help="Drain and stop the project's running host; wait until it exits.")] = False,
    timeout: Annotated[float | None, typer.Option(
        "--timeout", min=0, metavar="SECONDS",
        help=f"Seconds to wait: for --background to be ready (default"
             f" {START_TIMEOUT_S:g}), for --stop to exit (default: the"
             " drain grace, the hung-worker kill delay and"
             f" {STOP_MARGIN_S:g} more).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Run the supervisor: one worker subprocess per claimed run.

    In the foreground by default: SIGTERM, Ctrl-C or closing the terminal
    drains (runs are parked and resume later); a second signal stops at once.
    Arguments after `--` are passed to `pi` for agent steps. --background
    prints the pid and log of the host it started (exit 2 if one already
    runs); --stop drains the running one (exit 0, also when none runs).

    Example: pi-workflows host --background --concurrency 4
    """
    settings, paths = project_context(project)
    if background and stop:
        raise UsageError("--background and --stop do not go together")
    if stop:
        if concurrency is not None or ctx.args:
            raise UsageError("--stop takes no --concurrency and no arguments for pi")
        _stop(settings, paths, timeout, as_json)
        return
    if background:
        _background(paths, host_argv(paths.project, concurrency, ctx.args), timeout, as_json)
        return
    if timeout is not None or as_json:
        raise UsageError("--timeout and --json go with --background or --stop")
    raise typer.Exit(run_foreground(settings, paths, concurrency, ctx.args))


def _background(paths: Paths, argv: list[str], timeout: float | None, as_json: bool) -> None:
    host, log = start_background(paths, argv,
                                 timeout=START_TIMEOUT_S if timeout is None else timeout)
    if as_json:
        emit_json({"pid": host.pid, "runnerId": host.runner_id, "log": str(log),
                   "project": str(paths.project)})
    else:
        typer.echo(f"pi-workflows host: running in the background, pid {host.pid};"
                   f" log {log}; stop it with `pi-workflows host --stop`")


def _stop(settings: SettingsLike, paths: Paths, timeout: float | None, as_json: bool) -> None:
    if timeout is None:
        timeout = settings.drain_grace_s + settings.hung_kill_after_s + STOP_MARGIN_S
    host = stop_host(paths, timeout=timeout)
    if as_json:
        emit_json({"stopped": host is not None, "pid": None if host is None else host.pid})
    elif host is None:
        typer.echo("pi-workflows host: no host is running for this project")
    else:
        typer.echo(f"pi-workflows host: stopped pid {host.pid}"
                   " (drained: its running runs are parked and resume under the next host)")


def register(app: typer.Typer) -> None:
    app.command("host", context_settings={"allow_extra_args": True,
                                          "ignore_unknown_options": True})(host_command)
