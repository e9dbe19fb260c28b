"""The ``doctor`` command: check the installation and the project's state.

Owns printing the checks, one line each (or as JSON), and the exit code;
the checks are ``supervisor.maint.doctor``. ``register(app)`` adds the
command. Must not import the worker or another command module.
"""

from __future__ import annotations

from pathlib import Path

import typer

from ....protocol.errors import PiWorkflowsError
from ....protocol.settingspec import defaults
from ...maint.doctor import Check, check_pi, check_python, run_checks
from ..options import JsonOpt, ProjectOpt, emit_json, project_context


def _doctor_checks(project: Path) -> list[Check]:
    try:
        settings, paths = project_context(project)
    except PiWorkflowsError as exc:
        # Bad settings stop every command; say so, and check what needs none.
        return [check_python(), Check("settings", "fail", exc.message),
                check_pi(defaults())]
    return run_checks(settings, paths)


def doctor_command(project: ProjectOpt = Path("."), as_json: JsonOpt = False) -> None:
    """Check the installation and the project's state: one line each, ok, warn or FAIL.

    Checks Python, that Pi is installed and runs, that the store has the right
    layout (read-only), that the state is private (0700/0600), whether a host
    runs, and free disk. Changes nothing. Exits 1 if a check failed.

    Example: pi-workflows doctor --json
    """
    checks = _doctor_checks(project)
    failed = any(c.level == "fail" for c in checks)
    if as_json:
        emit_json({"ok": not failed, "checks": [c.as_json() for c in checks]})
    else:
        for check in checks:
            typer.echo(check.line())
    if failed:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("doctor")(doctor_command)
