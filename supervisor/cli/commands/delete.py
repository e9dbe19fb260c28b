"""The ``delete`` command: remove one run that has ended, as gc would.

Owns parsing ``delete``'s arguments and printing what it removed; the rules
and the removal are ``supervisor.maint.delete`` (gc's own path, for one
run). ``register(app)`` adds the command. Must not import the worker or
another command module.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ....protocol.clock import now_ms
from ...maint.delete import delete_run
from ...maint.gc import format_bytes, gc_store
from ...views.runref import project_store
from ..options import JsonOpt, ProjectOpt, RunArg, emit_json, project_context


def delete_command(
    run: RunArg,
    chain: Annotated[bool, typer.Option(
        "--chain", help="Also delete the runs linked to RUN (its continuations and forks,"
                        " and the runs it continues or was forked from).")] = False,
    project: ProjectOpt = Path("."),
    as_json: JsonOpt = False,
) -> None:
    """Delete one run that has ended: its queue rows and its bundle, as gc removes them.

    Refused (exit 2, nothing changed) for a run that is queued, running,
    parked or waiting at a checkpoint, one a live process uses, one whose
    messages a session has not received yet, and one linked to other runs
    (continuations, forks) unless --chain deletes them all.

    Example: pi-workflows delete 99624cea
    """
    settings, paths = project_context(project)
    project_store(settings, paths).close()  # no store: "no runs yet", and none is created
    with gc_store(settings, paths.store_file) as store:
        deleted = delete_run(store, paths, run, now=now_ms(), whole_chain=chain)
    if as_json:
        emit_json(deleted.as_json())
        return
    if deleted.finished:
        typer.echo(f"finished removing {len(deleted.finished)} run(s) an interrupted gc left")
    for line in deleted.removed:
        bundle = f"bundle {format_bytes(line.bytes)}" if line.has_bundle else "no bundle"
        typer.echo(f"deleted {line.run_id}  {line.workflow}  {line.state}  ({bundle})")


def register(app: typer.Typer) -> None:
    app.command("delete")(delete_command)
