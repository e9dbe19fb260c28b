"""The ``cancel`` command: cancel a run in any unfinished state and wait until it stopped.

Owns parsing ``cancel``'s arguments and wording its outcome; requesting the
cancel and waiting for it is ``supervisor.session.actions``, shared with the
fast command line. ``register(app)`` adds the command. Must not import the
worker or another command module.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ....protocol.errors import ExitCode
from ....protocol.states import CLAIMED, QueueState, RunStatus
from ...session import actions
from ...views.wording import cli
from ..exits import session_required
from ..options import (
    ByAgentOpt,
    JsonOpt,
    ProjectOpt,
    RunArg,
    SessionOpt,
    emit_json,
    project_context,
)


def cancel_command(
    run: RunArg,
    no_wait: Annotated[bool, typer.Option(
        "--no-wait", help="Return once the cancel is recorded; do not wait for a running"
                          " run to stop.")] = False,
    session: SessionOpt = None,
    by_agent: ByAgentOpt = False,
    project: ProjectOpt = Path("."),
    as_json: JsonOpt = False,
) -> None:
    """Cancel a run in any unfinished state, and wait (up to 15 s) until it has stopped.

    A queued or parked run is cancelled at once; a running one stops within
    about a second (the node in progress is stopped and no node starts after
    it); a run waiting at a checkpoint has its wait closed, so it can no
    longer be answered. A cancel is never dropped. With --by-agent (and
    --session S: the model of session S asked for it) S gets one follow-up
    turn once the run has ended cancelled; a person's cancel gives none.

    Example: pi-workflows cancel 99624cea
    """
    settings, paths = project_context(project)
    if by_agent and not session:
        raise session_required("cancel --by-agent")
    result, was_waiting = actions.cancel_run(settings, paths, run, no_wait=no_wait,
                                             by_session=session if by_agent else None)
    run = result.row.run_id
    row, status = result.row, result.status
    stopped = row.state not in CLAIMED
    if as_json:
        emit_json(actions.cancel_json(result))
        return
    if not stopped:
        # The worker is nudged: the step in progress gets its stop signal now.
        typer.echo(f"{run}: cancellation requested; the step in progress is being stopped"
                   " and no step starts after it"
                   + ("" if no_wait else
                      f" (still running; `{cli(paths.project, 'watch', run)}` follows it)"))
    elif status == RunStatus.CANCELLED or row.state == QueueState.CANCELLED:
        typer.echo(f"{run}: cancelled" + (" while it waited" if was_waiting else ""))
    else:
        # The run came to rest (finished, failed, waited) before the cancel reached it.
        typer.echo(f"{run}: {status or row.state} before the cancel took effect")
        raise typer.Exit(ExitCode.RUN_FAILED)


def register(app: typer.Typer) -> None:
    app.command("cancel")(cancel_command)
