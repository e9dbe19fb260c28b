"""The ``host`` command: the supervisor of a project's runs, in the foreground.

Owns parsing its arguments and printing its start-up banner; the work is
done by the host (``supervisor.host``) and its server (``supervisor.serve``).
``register(app)`` adds the command. Never imports the worker.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from ..protocol.logsetup import setup_logging
from .cli_options import ProjectOpt, project_context
from .host import Host, StartupReport
from .serve import HostServer


def host_command(
    ctx: typer.Context,
    project: ProjectOpt = Path("."),
    concurrency: Annotated[int | None, typer.Option(
        "--concurrency", min=1, max=256,
        help="Runs executed at once (default: the setting, else the number of CPUs).")] = None,
) -> None:
    """Run the supervisor in the foreground: one worker subprocess per claimed run.

    Arguments after `--` are passed to `pi` for agent steps. SIGTERM or Ctrl-C
    drains (runs are parked and resume later); a second signal stops at once.
    """
    settings, paths = project_context(project)
    setup_logging(paths.log_dir, level=settings.log_level, stderr_level="INFO", role="host")
    host = Host(paths, settings, concurrency=concurrency, pi_args=tuple(ctx.args))

    def started(report: StartupReport) -> None:
        sys.stderr.write(
            f"pi-workflows host: runner {report.runner_id} (pid {os.getpid()})\n"
            f"  project {paths.project}\n  store   {paths.store_file}\n"
            f"  runs    {paths.runs_dir}\n  logs    {paths.log_dir}\n"
            f"  reaped {report.reaped} orphan process(es); took over {report.taken_over}"
            f" run(s); concurrency {host.concurrency}\n"
            "  Ctrl-C or SIGTERM drains: running runs are parked and resume later\n")
        sys.stderr.flush()

    raise typer.Exit(HostServer(host).serve(on_start=started))


def register(app: typer.Typer) -> None:
    app.command("host", context_settings={"allow_extra_args": True,
                                          "ignore_unknown_options": True})(host_command)
