"""What ``run --detach``, ``answer``, ``cancel`` and ``fork`` do, without typer or pydantic.

Owns queueing a detached run, answering a waiting run (a continuation
queued for the host), requesting a cancel and waiting for it to settle,
queueing a fork (``session.fork`` checks and writes it) and poking the
host (saying on stderr when none runs). The typer commands
(``supervisor.cli.commands.run``, ``.answer``, ``.cancel`` and ``.fork``)
and the dashboard (``web.actions``) call these and word the results; the
fast command line (``supervisor.cli.main``) prints the same ``--json``
objects from the same calls. Imports ``protocol``, ``views.runref`` and
the session wing's cancel, fork, preflight, run input and sync; never
``host``, ``cli``, ``web`` or the worker.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...protocol.agentenv import differences, provider_env_names, resolve_agent_dir
from ...protocol.definitions.discovery import resolve_for
from ...protocol.errors import ConflictError, UsageError
from ...protocol.paths import Paths
from ...protocol.settingspec import SettingsLike
from ...protocol.states import CLAIMED, QueueState
from ...protocol.store import QueueRow, Store, open_store
from ...protocol.wakeup import poke
from ..views.runref import existing_row, project_store, resolve_run
from ..views.status import host_running
from ..views.wording import cli
from . import cancel
from .launch import Prepared, prepare_continuation, prepare_run
from .runinput import json_input, require_utf8

if TYPE_CHECKING:
    from .fork import ForkPlan


def wake_host(store: Store, paths: Paths) -> bool:
    """Poke the host; when none runs, say so on stderr: the run waits until one does.
    True when a host runs."""
    poke(paths.state_dir)
    if not host_running(store):
        with contextlib.suppress(OSError):
            start = cli(paths.project, "host", "--background")
            sys.stderr.write("pi-workflows: queued; no host is running for this project:"
                             f" start one with `{start}`\n")
        return False
    return True


def agent_notice(agent_dir: str | None, paths: Paths) -> None:
    """One line on stderr when the running host's agent settings differ from this shell's."""
    try:
        host = json.loads(paths.host_lock.read_text() or "{}")
    except (OSError, ValueError):
        return
    if not isinstance(host, dict):
        return
    line = differences(agent_dir, provider_env_names(os.environ), host)
    if line:
        with contextlib.suppress(OSError):
            sys.stderr.write(line + "\n")


def prepare(settings: SettingsLike, paths: Paths, name: str, raw: Any) -> Prepared:
    """Every check of a new run of ``name`` (workflow, input), before anything is written."""
    prepared = prepare_run(resolve_for(settings, paths.project, name), name, raw)
    return replace(prepared, agent_dir=resolve_agent_dir(settings.pi_agent_dir))


def reserve(store: Store, prepared: Prepared, session: str, *,
            by_agent: bool = False) -> QueueRow:
    """``start``: commit the session's reservation; every preflight check has run by now
    (seed 002, Start). ``by_agent``: the session's model starts it (``--by-agent``)."""
    busy = store.find_session_reservation(session)
    if busy is not None:
        raise ConflictError(
            f"session {session} already has an active run ({busy.run_id}, {busy.state});"
            " activate, finish or cancel it first", code="session_busy")
    return store.reserve(prepared.run_id, prepared.source, prepared.input, session,
                         parent_run_id=prepared.parent_run_id, agent_dir=prepared.agent_dir,
                         by_agent=by_agent)


def start(settings: SettingsLike, paths: Paths, prepared: Prepared, session: str, *,
          by_agent: bool = False) -> QueueRow:
    with open_store(settings, paths.store_file) as store:
        return reserve(store, prepared, session, by_agent=by_agent)


def start_json(row: QueueRow) -> dict[str, Any]:
    return {"action": "start", "workflow": row.workflow, "runId": row.run_id, "queued": True}


def detach(settings: SettingsLike, paths: Paths, prepared: Prepared, owner: str | None) -> QueueRow:
    """Queue a prepared run for the host."""
    with open_store(settings, paths.store_file) as store:
        row = store.enqueue_detached(prepared.run_id, prepared.source, prepared.input,
                                     notify_session=owner, agent_dir=prepared.agent_dir)
        if wake_host(store, paths):
            agent_notice(prepared.agent_dir, paths)
    return row


def answer(settings: SettingsLike, paths: Paths, text: str, value: Any, *, force: bool,
           owner: str | None) -> tuple[str, QueueRow, Any]:
    """(the answered run's id, its continuation's row, the answer as queued).

    A human decision's answer that is not one of its answers is refused
    (``AnswerRefused``, exit 2) before anything is written.
    """
    with project_store(settings, paths) as store:
        run = resolve_run(store, text, paths)
        _not_answered(store, run, paths.project)
        prepared = prepare_continuation(paths.runs_dir, run, value, force=force)
        try:
            row = store.enqueue_detached(prepared.run_id, prepared.source, prepared.input,
                                         parent_run_id=run, notify_session=owner,
                                         agent_dir=resolve_agent_dir(settings.pi_agent_dir))
        except ConflictError as exc:
            if exc.code == "continuation_exists":
                # Answered meanwhile: name that continuation.
                _not_answered(store, run, paths.project)
            raise
        wake_host(store, paths)
    return run, row, prepared.input


def _not_answered(store: Store, run: str, project: Path) -> None:
    child = store.continuation_of(run)
    if child is not None:
        raise ConflictError(f"run {run} was already answered: its continuation is"
                            f" {child.run_id} ({child.state}); see"
                            f" `{cli(project, 'status', child.run_id)}`",
                            code="continuation_exists")


def cancel_run(settings: SettingsLike, paths: Paths, text: str, *, no_wait: bool,
               by_session: str | None = None) -> tuple[cancel.Cancelled, bool]:
    """Request the cancel (and wait, unless ``no_wait``); (the result, whether it waited).

    ``by_session``: the model of that session asked (``cancel --by-agent``).
    """
    with project_store(settings, paths) as store:
        row = existing_row(store, text, paths)
        run = row.run_id
        was_waiting = row.state == QueueState.DONE
        row = cancel.request(store, paths.runs_dir, row, fsync=settings.fsync,
                             project=paths.project, by_session=by_session)
        poke(paths.state_dir)
        result = cancel.Cancelled(row, None)
        if not no_wait:
            result = cancel.settle_wait(store, paths.runs_dir, run, fsync=settings.fsync)
    return result, was_waiting


def fork(settings: SettingsLike, paths: Paths, text: str, from_node: str | None, *,
         force: bool, owner: str | None) -> tuple[ForkPlan, QueueRow]:
    """Queue a fork of the run ``text`` names at ``from_node`` (None: ``fork_run``'s
    default) for the host; (the plan, the fork's row). ``owner``: the session notified."""
    # Here, not at the top: the fast command line's answer and cancel import this
    # module and never need the fork's bundle rebuilding.
    from .fork import fork_run

    with project_store(settings, paths) as store:
        row = existing_row(store, text, paths)
        plan, queued = fork_run(store, paths.runs_dir, row, from_node, force=force,
                                notify_session=owner, fsync=settings.fsync,
                                project=paths.project,
                                agent_dir=resolve_agent_dir(settings.pi_agent_dir))
        wake_host(store, paths)
    return plan, queued


def answer_value(text: list[str] | None, input_json: str | None, input_file: str | None) -> Any:
    """The answer: words, or JSON from --input-json / --input-file (not both)."""
    given, value = json_input(input_json, input_file)
    if given and text:
        raise UsageError("give the answer as words or as JSON, not both")
    if not given:
        if not text:
            raise UsageError("give the answer as words, --input-json or --input-file")
        value = require_utf8(" ".join(text), "the answer")
    return value


def detach_json(row: QueueRow) -> dict[str, Any]:
    return {"runId": row.run_id, "workflow": row.workflow, "state": row.state}


def answer_json(run: str, row: QueueRow, given: Any = None) -> dict[str, Any]:
    """``given``: the answer as queued; a human decision's names its ``choice`` (a label)."""
    chosen = given.get("choice") if isinstance(given, dict) else None
    return {"runId": row.run_id, "parentRunId": run, "workflow": row.workflow,
            "state": row.state, **({} if chosen is None else {"choice": chosen})}


def cancel_json(result: cancel.Cancelled) -> dict[str, Any]:
    row = result.row
    return {"runId": row.run_id, "state": row.state, "runStatus": result.status,
            "cancelRequested": row.cancel_requested, "stopped": row.state not in CLAIMED}
