"""The ``fork`` command: a new run from one node of a run that has ended.

Owns parsing ``fork``'s arguments and printing its result; the rules and
the writes are ``supervisor.session.fork``'s, queued through
``supervisor.session.actions`` (as the dashboard does). ``register(app)`` adds the command.
Imports typer, ``protocol`` and the shared CLI options; must not import the
worker or another command module.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Annotated

import typer

from ...session import actions
from ..options import (
    JsonOpt,
    ProjectOpt,
    RunArg,
    SessionOpt,
    emit_json,
    project_context,
    session_id,
)


def fork_command(
    run: RunArg,
    from_node: Annotated[str | None, typer.Option(
        "--from", metavar="NODE", show_default=False,
        help="The node the fork starts at (default: the node a failed run failed at).")] = None,
    force: Annotated[bool, typer.Option(
        "--force", help="Fork even though the workflow file changed since RUN started (the"
                        " fork runs on the current file; the change is recorded).")] = False,
    session: SessionOpt = None,
    project: ProjectOpt = Path("."),
    as_json: JsonOpt = False,
) -> None:
    """Queue a new run that starts at a node of RUN with the outputs of the nodes before it.

    Nodes before NODE are not run again (their outputs, and the effects they
    applied, are carried); NODE and everything after it run afresh, on the
    current workflow file. RUN itself is never changed. With --session the
    fork's notifications go to that session.

    RUN is one that failed, completed or was cancelled.

    Example: pi-workflows fork 99624cea --from build
    """
    settings, paths = project_context(project)
    owner = session_id(session)
    plan, queued = actions.fork(settings, paths, run, from_node, force=force, owner=owner)
    run = plan.original
    if plan.mismatch is not None:
        with contextlib.suppress(OSError):
            sys.stderr.write(f"pi-workflows: the workflow file changed since {run} started;"
                             " the fork runs on the current one (recorded in its trace)\n")
    if as_json:
        emit_json({"runId": queued.run_id, "workflow": queued.workflow, "state": queued.state,
                   "forkedFrom": plan.original, "forkNode": plan.node,
                   "carriedNodes": sorted(plan.carried.outputs),
                   "carriedSteps": plan.carried.steps, "sourceMismatch": plan.mismatch,
                   "forced": plan.mismatch is not None, "notifySession": queued.notify_session})
    else:
        typer.echo(queued.run_id)


def register(app: typer.Typer) -> None:
    app.command("fork")(fork_command)
