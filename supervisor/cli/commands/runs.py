"""The run commands: run, answer, cancel, resume and watch.

Owns parsing their arguments and printing their results; the work is done
by ``supervisor.session.actions`` (detached runs, answers, cancels: shared with the
fast command line), the session runner (``supervisor.session.runner``), preflight
(``supervisor.session.launch``), settling (``protocol.settle``) and the store (the
``host`` command is ``supervisor.cli.commands.host``). ``register(app)`` adds the
commands. Never imports the worker.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ....protocol.errors import ExitCode, UsageError
from ....protocol.settle import repin_source
from ....protocol.states import CLAIMED, QueueState, RunStatus
from ....protocol.store import open_store
from ...session import actions as runcmds
from ...session.actions import wake_host
from ...session.activation import run_in_session
from ...session.runner import run_attached, session_runner
from ...views.runref import existing_row as _existing
from ...views.runref import project_store as _store
from ...views.runview import JsonLinesView, terminal_view
from ...views.status import run_status
from ...views.watch import watch
from ..options import (
    InputFileOpt,
    InputJsonOpt,
    JsonOpt,
    NameArg,
    ProjectOpt,
    RunArg,
    SessionOpt,
    TaskArg,
    emit_json,
    parse_input,
    project_context,
    session_id,
)

__all__ = ["register", "wake_host"]  # wake_host: supervisor.cli.commands.fork


def run_command(
    name: NameArg,
    task: TaskArg = None,
    input_json: InputJsonOpt = None,
    input_file: InputFileOpt = None,
    detach: Annotated[bool, typer.Option(
        "--detach", help="Queue the run for the host and print its id.")] = False,
    session: SessionOpt = None,
    project: ProjectOpt = Path("."),
    as_json: JsonOpt = False,
) -> None:
    """Start a run of workflow NAME, here and watched live (or queued with --detach).

    Without --detach the run starts in this terminal and its steps are shown
    as they happen; with --session it is that session's run (`start` and
    `activate` in one). Ctrl-C, closing the terminal or SIGTERM parks it, and
    a running `pi-workflows host` resumes it. With --detach the host runs it
    (and --session only addresses its notifications). Exit codes: 0
    completed, 1 failed or cancelled, 3 waiting at a checkpoint, 4 parked.

    Example: pi-workflows run review fix the login bug --detach
    """
    settings, paths = project_context(project)
    owner = session_id(session)
    raw = parse_input(task, input_json, input_file)
    prepared = runcmds.prepare(settings, paths, name, raw)
    if not detach:
        with open_store(settings, paths.store_file) as store, \
                terminal_view(typer.echo, project=paths.project, quiet=as_json) as view:
            if owner is None:
                code = run_attached(store, settings, paths, prepared, view=view)
            else:
                code = run_in_session(store, settings, paths, prepared, owner, view=view)
            if as_json:
                row = store.get(prepared.run_id)
                emit_json(run_status(row, paths.runs_dir) if row else {"runId": prepared.run_id})
        raise typer.Exit(code)
    row = runcmds.detach(settings, paths, prepared, owner)
    if as_json:
        emit_json(runcmds.detach_json(row))
    else:
        typer.echo(row.run_id)


def answer_command(
    run: RunArg,
    text: Annotated[list[str] | None, typer.Argument(
        metavar="[TEXT]...", help="The answer as words (a string).", show_default=False)] = None,
    input_json: InputJsonOpt = None,
    input_file: InputFileOpt = None,
    force: Annotated[bool, typer.Option(
        "--force", help="Continue even though the workflow definition changed.")] = False,
    session: SessionOpt = None,
    project: ProjectOpt = Path("."),
    as_json: JsonOpt = False,
) -> None:
    """Answer a run waiting at a checkpoint: queues a continuation run for the host.

    With --session, the continuation's notifications go to that session. A
    run is answered once: a second answer names the continuation it has.

    Example: pi-workflows answer 99624cea yes, ship it
    """
    settings, paths = project_context(project)
    owner = session_id(session)
    answer = runcmds.answer_value(text, input_json, input_file)
    run, row = runcmds.answer(settings, paths, run, answer, force=force, owner=owner)
    if as_json:
        emit_json(runcmds.answer_json(run, row))
    else:
        typer.echo(row.run_id)


def cancel_command(
    run: RunArg,
    no_wait: Annotated[bool, typer.Option(
        "--no-wait", help="Return once the cancel is recorded; do not wait for a running"
                          " run to stop.")] = False,
    project: ProjectOpt = Path("."),
    as_json: JsonOpt = False,
) -> None:
    """Cancel a run in any unfinished state, and wait (up to 15 s) until it has stopped.

    A queued or parked run is cancelled at once; a running one stops within
    about a second (the node in progress is stopped and no node starts after
    it); a run waiting at a checkpoint has its wait closed, so it can no
    longer be answered. A cancel is never dropped.

    Example: pi-workflows cancel 99624cea
    """
    settings, paths = project_context(project)
    result, was_waiting = runcmds.cancel_run(settings, paths, run, no_wait=no_wait)
    run = result.row.run_id
    row, status = result.row, result.status
    stopped = row.state not in CLAIMED
    if as_json:
        emit_json(runcmds.cancel_json(result))
        return
    if not stopped:
        typer.echo(f"{run}: cancellation requested; the run stops at its next node boundary"
                   + ("" if no_wait else " (still running; `pi-workflows watch` follows it)"))
    elif status == RunStatus.CANCELLED or row.state == QueueState.CANCELLED:
        typer.echo(f"{run}: cancelled" + (" while it waited" if was_waiting else ""))
    else:
        # The run came to rest before the cancel reached a node boundary.
        typer.echo(f"{run}: {status or row.state} before the cancel took effect")
        raise typer.Exit(ExitCode.RUN_FAILED)


def resume_command(
    run: RunArg,
    force: Annotated[bool, typer.Option(
        "--force", help="Continue on a workflow file that changed since the run started "
                        "(the change is recorded in the run's trace).")] = False,
    here: Annotated[bool, typer.Option(
        "--here", help="Run it in this terminal now, shown live, instead of in a host.")] = False,
    session: SessionOpt = None,
    project: ProjectOpt = Path("."),
    as_json: JsonOpt = False,
) -> None:
    """Resume a parked run (a host picks it up), or accept its changed workflow file.

    With --here (or --session, as that session) the run continues in this
    terminal at once, shown live like `run`, with `run`'s exit codes.

    Example: pi-workflows resume 20261201T083022Z-pipeline-025acc92 --here
    """
    settings, paths = project_context(project)
    owner = session_id(session)
    with _store(settings, paths) as store:
        row = _existing(store, run, paths)
        run = row.run_id
        if row.state != QueueState.PARKED:
            raise UsageError(f"run {run} is {row.state}; only a parked run can be resumed",
                             code="not_parked")
        if row.error_code == "source_changed":
            if not force:
                raise UsageError(
                    f"run {run} waits because its workflow file changed since it started;"
                    " check the change, then resume with --force (or cancel the run)",
                    code="source_changed")
            row = repin_source(store, paths.runs_dir, run, fsync=settings.fsync)
        elif row.error_code is not None:
            # Parked blocked for a person (a bundle that stayed locked, a crash
            # loop that could not be recorded): this is that person.
            row = store.unblock(run)
        if here or owner is not None:
            with terminal_view(typer.echo, project=paths.project, quiet=as_json) as view, \
                    session_runner(store, settings, paths, view=view) as runner:
                code = runner.drive(store.claim_by_id(run, runner.runner_id, session=owner))
            if as_json:
                found = store.get(run)
                emit_json(run_status(found, paths.runs_dir) if found else {"runId": run})
            raise typer.Exit(code)
        wake_host(store, paths)
    if as_json:
        emit_json({"runId": run, "state": row.state, "forced": force})
    else:
        typer.echo(f"{run}: parked and ready; a running host resumes it")


def watch_command(
    run: RunArg,
    project: ProjectOpt = Path("."),
    as_json: Annotated[bool, typer.Option(
        "--json", help="Print the run's trace events as JSON lines, as they are written.")
    ] = False,
) -> None:
    """Follow a run live until it settles (view only: closing it changes nothing).

    Exits 0 when the run completed, 1 when it failed or was cancelled, 3 when
    it waits at a checkpoint.

    Example: pi-workflows watch 99624cea --json
    """
    settings, paths = project_context(project)
    with _store(settings, paths) as store:
        run = _existing(store, run, paths).run_id
        if as_json:
            code = watch(store, paths.runs_dir, run, view=JsonLinesView(
                typer.echo, lambda line: typer.echo(line, err=True)))
        else:
            with terminal_view(typer.echo, project=paths.project) as view:
                code = watch(store, paths.runs_dir, run, view=view)
    raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    app.command("run")(run_command)
    app.command("answer")(answer_command)
    app.command("cancel")(cancel_command)
    app.command("resume")(resume_command)
    app.command("watch")(watch_command)

