"""The run commands: host, run, status, list, answer, cancel, resume and watch.

Owns parsing their arguments and printing their results; the work is done
by the host (``supervisor.host``), the session runner (``supervisor.session``),
preflight (``protocol.launch``), settling (``protocol.settle``) and the
store. ``register(app)`` adds the commands. Never imports the worker.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from ..protocol.bundle import bundle_exists
from ..protocol.discovery import resolve_for
from ..protocol.errors import ClaimLost, NotFound, UsageError
from ..protocol.launch import prepare_continuation, prepare_run
from ..protocol.limits import validate_run_id
from ..protocol.logsetup import setup_logging
from ..protocol.settings import Paths, Settings
from ..protocol.settle import cancel_parked, repin_source
from ..protocol.states import CLAIMED, QUEUE_STATES, TERMINAL, QueueState
from ..protocol.store import QueueRow, Store, open_store
from ..protocol.wakeup import poke
from .activation import run_in_session
from .cli_options import (
    InputFileOpt,
    InputJsonOpt,
    JsonOpt,
    ProjectOpt,
    SessionOpt,
    emit_json,
    json_input,
    parse_input,
    project_context,
    session_id,
)
from .host import Host, StartupReport
from .runview import JsonLinesView, terminal_view
from .serve import HostServer
from .session import run_attached, session_runner
from .sync import host_running
from .views import run_status, status_line
from .watch import watch


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


def run_command(
    name: Annotated[str, typer.Argument(help="Workflow name (see `pi-workflows workflows`).")],
    task: Annotated[list[str] | None, typer.Argument(
        help="Task words; they become the input {\"task\": \"...\"}.", show_default=False)] = None,
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
    """
    settings, paths = project_context(project)
    owner = session_id(session)
    raw = parse_input(task, input_json, input_file)
    prepared = prepare_run(resolve_for(settings, paths.project, name), name, raw)
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
    with open_store(settings, paths.store_file) as store:
        row = store.enqueue_detached(prepared.run_id, prepared.source, prepared.input,
                                     notify_session=owner)
        wake_host(store, paths)
    if as_json:
        emit_json({"runId": row.run_id, "workflow": row.workflow, "state": row.state})
    else:
        typer.echo(row.run_id)


def wake_host(store: Store, paths: Paths) -> None:
    """Poke the host; when none runs, say so on stderr: the run waits until one does."""
    poke(paths.state_dir)
    if not host_running(store):
        with contextlib.suppress(OSError):
            sys.stderr.write("pi-workflows: queued; no host is running for this project:"
                             " start one with `pi-workflows host`\n")


def _store(settings: Settings, paths: Paths) -> Store:
    if not paths.store_file.exists():
        raise NotFound(f"no runs yet for {paths.project} (no store at {paths.store_file})",
                       code="no_store")
    return open_store(settings, paths.store_file)


def _existing(store: Store, run: str) -> QueueRow:
    row = store.get(run)
    if row is None:
        raise NotFound(f"no run {run} in this project", code="run_not_found")
    return row


def status_command(
    run: Annotated[str | None, typer.Argument(help="Run id (default: every unfinished run).",
                                              show_default=False)] = None,
    session: SessionOpt = None,
    project: ProjectOpt = Path("."),
    as_json: JsonOpt = False,
) -> None:
    """Show a run's state: from the queue (even before it has a bundle) and its bundle.

    Without RUN: every unfinished run and every run waiting for an answer, or
    with --session that session's reservation (or else its latest run).
    """
    settings, paths = project_context(project)
    owner = session_id(session)
    if run is not None:
        validate_run_id(run)
    with _store(settings, paths) as store:
        if run is not None:
            info = run_status(_existing(store, run), paths.runs_dir)
            emit_json(info) if as_json else typer.echo(status_line(info))
            return
        if owner is not None:
            mine = store.session_run(owner)
            found = None if mine is None else run_status(mine, paths.runs_dir)
            if as_json:
                emit_json({"session": owner, "run": found})
            else:
                typer.echo(f"session {owner}: no runs" if found is None else status_line(found))
            return
        # Unfinished runs, and runs that wait for an answer (done in the queue).
        rows = [r for r in store.list_runs() if r.state not in TERMINAL]
        rows += store.waiting_runs()
        rows.sort(key=lambda r: (r.created_at, r.run_id))
        infos = [run_status(r, paths.runs_dir) for r in rows]
    if as_json:
        emit_json({"runs": infos})
    else:
        for info in infos:
            typer.echo(status_line(info))
        if not infos:
            typer.echo("no unfinished runs and none waiting for an answer")


def list_command(
    state: Annotated[str | None, typer.Option(
        "--state", help=f"Only runs in this queue state ({', '.join(QUEUE_STATES)}).")] = None,
    project: ProjectOpt = Path("."),
    as_json: JsonOpt = False,
) -> None:
    """List the project's runs, oldest first."""
    settings, paths = project_context(project)
    if state is not None and state not in QUEUE_STATES:
        raise UsageError(f"unknown queue state {state!r}; use one of {', '.join(QUEUE_STATES)}")
    if not paths.store_file.exists():
        infos: list[dict[str, Any]] = []
    else:
        with open_store(settings, paths.store_file) as store:
            infos = [run_status(r, paths.runs_dir) for r in store.list_runs(state)]
    if as_json:
        emit_json({"runs": infos})
        return
    for info in infos:
        typer.echo(status_line(info))


def answer_command(
    run: Annotated[str, typer.Argument(help="The waiting run to answer.", show_default=False)],
    text: Annotated[list[str] | None, typer.Argument(
        help="The answer as words (a string).", show_default=False)] = None,
    input_json: InputJsonOpt = None,
    input_file: InputFileOpt = None,
    force: Annotated[bool, typer.Option(
        "--force", help="Continue even though the workflow definition changed.")] = False,
    session: SessionOpt = None,
    project: ProjectOpt = Path("."),
    as_json: JsonOpt = False,
) -> None:
    """Answer a run waiting at a checkpoint: queues a continuation run for the host.

    With --session, the continuation's notifications go to that session.
    """
    settings, paths = project_context(project)
    owner = session_id(session)
    given, answer = json_input(input_json, input_file)
    if given and text:
        raise UsageError("give the answer as words or as JSON, not both")
    if not given:
        if not text:
            raise UsageError("give the answer as words, --input-json or --input-file")
        answer = " ".join(text)
    validate_run_id(run)
    prepared = prepare_continuation(paths.runs_dir, run, answer, force=force)
    with _store(settings, paths) as store:
        row = store.enqueue_detached(prepared.run_id, prepared.source, prepared.input,
                                     parent_run_id=run, notify_session=owner)
        wake_host(store, paths)
    if as_json:
        emit_json({"runId": row.run_id, "parentRunId": run, "workflow": row.workflow,
                   "state": row.state})
    else:
        typer.echo(row.run_id)


def cancel_command(
    run: Annotated[str, typer.Argument(help="The run to cancel.", show_default=False)],
    project: ProjectOpt = Path("."),
    as_json: JsonOpt = False,
) -> None:
    """Cancel a run: at once if it is not running, else at its next node boundary.

    A node in progress is stopped at its worker's next lease renewal.
    """
    settings, paths = project_context(project)
    validate_run_id(run)
    with _store(settings, paths) as store:
        row = _existing(store, run)
        if row.state == QueueState.RUNNING or (row.state == QueueState.STARTING
                                               and bundle_exists(paths.runs_dir, run)):
            # Its owner writes the terminal event, so the bundle agrees.
            row = store.request_cancel(run)
        elif row.state == QueueState.PARKED:
            try:
                row = cancel_parked(store, paths.runs_dir, run, fsync=settings.fsync)
            except ClaimLost:
                row = store.request_cancel(run)  # a runner resumed it meanwhile: ask its owner
        else:
            row = store.cancel(run)
    poke(paths.state_dir)
    if as_json:
        emit_json({"runId": row.run_id, "state": row.state,
                   "cancelRequested": row.cancel_requested})
    elif row.state in CLAIMED:
        typer.echo(f"{run}: cancellation requested; the run stops at its next node boundary")
    else:
        typer.echo(f"{run}: {row.state}")


def resume_command(
    run: Annotated[str, typer.Argument(help="The parked run to resume.", show_default=False)],
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
    validate_run_id(run)
    with _store(settings, paths) as store:
        row = _existing(store, run)
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
    run: Annotated[str, typer.Argument(help="The run to watch.", show_default=False)],
    project: ProjectOpt = Path("."),
    as_json: Annotated[bool, typer.Option(
        "--json", help="Print the run's trace events as JSON lines, as they are written.")
    ] = False,
) -> None:
    """Follow a run live until it settles (view only: closing it changes nothing).

    Exits 0 when the run completed, 1 when it failed or was cancelled, 3 when
    it waits at a checkpoint.

    Example: pi-workflows watch 20261201T083022Z-pipeline-025acc92 --json
    """
    settings, paths = project_context(project)
    validate_run_id(run)
    with _store(settings, paths) as store:
        _existing(store, run)
        if as_json:
            code = watch(store, paths.runs_dir, run, view=JsonLinesView(
                typer.echo, lambda line: typer.echo(line, err=True)))
        else:
            with terminal_view(typer.echo, project=paths.project) as view:
                code = watch(store, paths.runs_dir, run, view=view)
    raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    app.command("host", context_settings={"allow_extra_args": True,
                                          "ignore_unknown_options": True})(host_command)
    app.command("run")(run_command)
    app.command("status")(status_command)
    app.command("list")(list_command)
    app.command("answer")(answer_command)
    app.command("cancel")(cancel_command)
    app.command("resume")(resume_command)
    app.command("watch")(watch_command)

