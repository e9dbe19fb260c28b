"""The foreground host's life once its arguments are parsed.

Owns what ``pi-workflows host`` does in the foreground: the host's logging,
the ``Host`` and its server, and the start-up banner. Shared by the typer
command (``supervisor.cli.commands.host``) and the fast entry point
(``supervisor.cli.main``), which starts a host without importing typer or
pydantic: a host that restarts after a crash is back to its runs sooner.
``ui`` adds the dashboard child (``host.dashboard``). Imports ``protocol``
and the host wing; never typer, pydantic or the worker.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from ...protocol.logsetup import setup_logging
from ...protocol.paths import Paths
from ...protocol.settingspec import SettingsLike
from .dashboard import Dashboard
from .loop import Host, StartupReport
from .serve import HostServer

# The bounds of --concurrency (the typer option and the fast path share them).
MIN_CONCURRENCY, MAX_CONCURRENCY = 1, 256


def run_foreground(settings: SettingsLike, paths: Paths, concurrency: int | None,
                   pi_args: Sequence[str], ui: bool = False) -> int:
    """Serve until drained; the exit code. ``ui``: keep a dashboard child beside it."""
    setup_logging(paths.log_dir, level=settings.log_level, stderr_level="INFO", role="host")
    host = Host(paths, settings, concurrency=concurrency, pi_args=tuple(pi_args))

    def started(report: StartupReport) -> None:
        sys.stderr.write(
            f"pi-workflows host: runner {report.runner_id} (pid {os.getpid()})\n"
            f"  project {paths.project}\n  store   {paths.store_file}\n"
            f"  runs    {paths.runs_dir}\n  logs    {paths.log_dir}\n"
            f"  reaped {report.reaped} orphan process(es); took over {report.taken_over}"
            f" run(s); concurrency {host.concurrency}\n"
            "  `pi-workflows host --stop`, Ctrl-C or SIGTERM drains: running runs are parked"
            " and resume later\n")
        sys.stderr.flush()

    dashboard = Dashboard(paths) if ui else None

    def with_ui(report: StartupReport) -> None:
        started(report)
        if dashboard is not None:
            dashboard.start()
            sys.stderr.write(f"  dashboard: its URL (with the token) is in {dashboard.url_file}\n")
            sys.stderr.flush()

    try:
        return HostServer(host).serve(on_start=with_ui)
    finally:
        if dashboard is not None:
            dashboard.stop()
