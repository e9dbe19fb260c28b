"""The ``host`` command: the supervisor of a project's runs.

Owns parsing its arguments and printing its start-up banner and results;
the work is done by the host (``supervisor.host.loop``), its server
(``supervisor.host.serve``) and, for ``--background`` and ``--stop``,
``supervisor.host.background``. ``register(app)`` adds the command. Must not
import the worker or another command module.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path
from typing import Annotated

import typer

from ....protocol.errors import ExitCode, UsageError
from ....protocol.paths import UI_URL_NAME, Paths
from ....protocol.settingspec import SettingsLike
from ....protocol.states import CLAIMED
from ....protocol.store import open_store, store_present
from ...host.background import (
    HOST_LOG,
    START_TIMEOUT_S,
    STOP_MARGIN_S,
    find_host,
    host_argv,
    start_background,
    stop_host,
)
from ...host.foreground import MAX_CONCURRENCY, MIN_CONCURRENCY, run_foreground
from ...views.timefmt import duration
from ...views.wording import cli
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
    status: Annotated[bool, typer.Option(
        "--status", help="Show the running host (pid, uptime, runs held, log); exit 1 when"
                         " none runs.")] = False,
    logs: Annotated[bool, typer.Option(
        "--logs", help="Print the host's log (<logDir>/host.log).")] = False,
    follow: Annotated[bool, typer.Option(
        "--follow", "-f", help="With --logs: keep printing what the host writes until"
                               " Ctrl-C.")] = False,
    ui: Annotated[bool, typer.Option(
        "--ui", help="Also serve the web dashboard (a `pi-workflows ui` child, read-only);"
                     " its URL with the token is in <stateDir>/ui-url (0600).")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Run the supervisor: one worker subprocess per claimed run.

    In the foreground by default: SIGTERM, Ctrl-C or closing the terminal
    drains (runs are parked and resume later); a second signal stops at once.
    Arguments after `--` are passed to `pi` for agent steps. --background
    prints the pid and log of the host it started (exit 2 if one already
    runs); --stop drains the running one (exit 0, also when none runs).

    --status shows the running host; --logs [--follow] prints its log.

    Example: pi-workflows host --background --concurrency 4

    Example: pi-workflows host --status --json
    """
    pi_args = _pi_args(ctx)
    settings, paths = project_context(project)
    modes = [name for name, on in (("--background", background), ("--stop", stop),
                                   ("--status", status), ("--logs", logs)) if on]
    if len(modes) > 1:
        raise UsageError(f"{modes[0]} and {modes[1]} do not go together")
    if ui and (status or logs or stop):
        raise UsageError(f"--ui goes with a host that starts, not with {modes[0]}")
    if follow and not logs:
        raise UsageError("--follow goes with --logs")
    if status or logs:
        if concurrency is not None or pi_args or timeout is not None:
            raise UsageError(f"{modes[0]} takes no --concurrency, --timeout or arguments for pi")
        if status:
            raise typer.Exit(_status(settings, paths, as_json))
        if as_json:
            raise UsageError("--logs prints the log as it is; it has no --json")
        raise typer.Exit(_logs(paths, follow))
    if stop:
        if concurrency is not None or pi_args:
            raise UsageError("--stop takes no --concurrency and no arguments for pi")
        _stop(settings, paths, timeout, as_json)
        return
    if background:
        _background(paths, host_argv(paths.project, concurrency, pi_args, ui=ui), timeout,
                    as_json)
        return
    if timeout is not None or as_json:
        raise UsageError("--timeout and --json go with --background or --stop")
    if ui:
        raise typer.Exit(run_foreground(settings, paths, concurrency, pi_args, ui=True))
    raise typer.Exit(run_foreground(settings, paths, concurrency, pi_args))


def _pi_args(ctx: typer.Context) -> list[str]:
    """The words after ``--``: only those reach ``pi``; any other extra word is refused."""
    root = ctx.find_root().obj
    raw = root.get("argv") if isinstance(root, dict) else None
    extra = list(ctx.args)
    after = raw[raw.index("--") + 1:] if raw and "--" in raw else []
    if extra != after:
        raise UsageError(f"unexpected argument {extra[0]!r}: arguments for pi go after `--`"
                         " (see --help)")
    return after


def _status(settings: SettingsLike, paths: Paths, as_json: bool) -> int:
    host = find_host(paths)
    log = paths.log_dir / HOST_LOG
    if host is None:
        if as_json:
            emit_json({"running": False, "log": str(log)})
        else:
            typer.echo("pi-workflows host: no host is running for this project", err=True)
        return ExitCode.RUN_FAILED
    held = 0
    if store_present(settings, paths.store_file) and host.runner_id is not None:
        with open_store(settings, paths.store_file) as store:
            held = sum(1 for row in store.list_runs(limit=100_000)
                       if row.runner_id == host.runner_id and row.state in CLAIMED)
    uptime_ms = max(0, int((time.time() - host.start_time) * 1000))
    if as_json:
        emit_json({"running": True, "pid": host.pid, "runnerId": host.runner_id,
                   "ready": host.ready, "uptimeMs": uptime_ms, "runsHeld": held,
                   "log": str(log), "project": str(paths.project)})
    else:
        state = "running" if host.ready else "starting"
        typer.echo(f"pi-workflows host: {state}, pid {host.pid}, up {duration(uptime_ms)},"
                   f" {held} run(s) held; log {log}")
    return ExitCode.OK


def _logs(paths: Paths, follow: bool) -> int:
    log = paths.log_dir / HOST_LOG
    try:
        fh = open(log, "rb")  # noqa: SIM115 (kept open while following)
    except FileNotFoundError:
        typer.echo(f"pi-workflows host: no host log yet at {log}", err=True)
        return ExitCode.RUN_FAILED
    out = sys.stdout.buffer
    with fh:
        out.write(fh.read())
        out.flush()
        try:
            while follow:
                chunk = fh.read()
                if chunk:
                    out.write(chunk)
                    out.flush()
                    continue
                if os.path.getsize(log) < fh.tell():  # rotated: read the new file
                    fh.seek(0)
                    continue
                time.sleep(0.2)  # a log has no event to wait on: poll it, as tail -f does
        except (KeyboardInterrupt, FileNotFoundError):
            return ExitCode.OK
    return ExitCode.OK


UI_URL_WAIT_S = 10.0  # the dashboard child starts after the host is ready


def _background(paths: Paths, argv: list[str], timeout: float | None, as_json: bool) -> None:
    # A file left by a host that was killed is not this host's dashboard: wait for a newer one.
    url_file = paths.state_dir / UI_URL_NAME if "--ui" in argv else None
    left = _mtime(url_file) if url_file is not None else None
    host, log = start_background(paths, argv,
                                 timeout=START_TIMEOUT_S if timeout is None else timeout)
    if as_json:
        emit_json({"pid": host.pid, "runnerId": host.runner_id, "log": str(log),
                   "project": str(paths.project),
                   **({} if url_file is None else {"uiUrlFile": str(url_file)})})
        return
    typer.echo(f"pi-workflows host: running in the background, pid {host.pid};"
               f" log {log}; stop it with `{cli(paths.project, 'host', '--stop')}`")
    if url_file is not None:
        url = _wait_for_url(url_file, left, UI_URL_WAIT_S)
        typer.echo(f"pi-workflows host: dashboard at {url}" if url else
                   f"pi-workflows host: the dashboard's URL will be in {url_file}")


def _mtime(path: Path) -> int | None:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return None


def _wait_for_url(path: Path, left: int | None, seconds: float) -> str | None:
    """The dashboard child's URL once it has written it (it starts after the host);
    ``left``: the modification time of a file an earlier host left, not to be read."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            text = path.read_text().strip()
            if text.startswith("http://") and _mtime(path) != left:
                return text
        time.sleep(0.05)  # a file another process writes: no event to wait on
    return None


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
    # Extra words are allowed so that those after `--` reach pi; an unknown
    # option is click's error (exit 2), a stray word ours (see _pi_args).
    app.command("host", context_settings={"allow_extra_args": True})(host_command)
