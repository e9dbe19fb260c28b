"""Executing one claimed run end to end, inside whichever process owns it.

Owns the bridge between a queue claim and the engine, in four steps: load
and pin the workflow, create or resume the bundle, the final activation
fence (``mark_running``) and the engine run, and the one queue transition
that matches how the bundle stopped (``settle_queue``, also used when a
bundle turns out to be settled already). Imports ``protocol`` and the
worker's engine, control and agent interface.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..protocol.bundle import Bundle, BundleCorrupt, BundleExists
from ..protocol.bundlewriter import BundleWriter
from ..protocol.definitions.discovery import LoadedWorkflow, WorkflowLoadError, load_workflow_file
from ..protocol.errors import PiWorkflowsError
from ..protocol.limits import safe_error_message
from ..protocol.settle import settle_bundle
from ..protocol.states import PAUSED_CODE, QueueState, RunStatus, queue_state_for
from ..protocol.store import Claim, QueueRow, Store
from .agent import AgentExecutor, warm_up
from .control import Control
from .engine import PARKED, PAUSED, Engine, ResumeRefused, SourceChanged
from .presentation import render

Q = QueueState
EngineHook = Callable[[Engine], None]


@dataclass(frozen=True)
class RunOutcome:
    run_id: str
    outcome: str  # a settled RunStatus value, or "parked"
    error_code: str | None = None


def _running(store: Store, claim: Claim, state: QueueState) -> None:
    """Pass the activation fence if the claim is still ``starting``."""
    if state == Q.STARTING:
        store.mark_running(claim.run_id, claim.token)


def settle_queue(store: Store, claim: Claim, state: QueueState, outcome: str,
                 error: Mapping[str, Any] | None = None, *,
                 presentation: str | None = None) -> RunOutcome:
    """Move the queue row (now in ``state``) to match how the bundle stopped.

    The bundle decides; the queue follows. ``outcome`` is the bundle's settled
    status, or ``parked`` when the run stopped without settling.
    ``presentation`` (a completed or waiting run's rendered message) becomes
    its session's presentation turn, with the move.
    """
    run_id = claim.run_id
    if outcome == PAUSED:
        # Held for a person: parked with the pause's code, which no runner takes.
        _running(store, claim, state)
        store.park(run_id, claim.token, code=PAUSED_CODE, message="paused by request")
        return RunOutcome(run_id, PARKED, PAUSED_CODE)
    if outcome == PARKED:
        _running(store, claim, state)
        store.park(run_id, claim.token)
        return RunOutcome(run_id, outcome)
    target = queue_state_for(outcome)
    if target == Q.DONE:
        _running(store, claim, state)
        store.finish(run_id, claim.token, outcome, presentation=presentation)
        return RunOutcome(run_id, outcome)
    if target == Q.CANCELLED:
        store.cancel(run_id, claim.token)
        return RunOutcome(run_id, outcome)
    code = str((error or {}).get("code") or outcome)
    store.fail(run_id, claim.token, code, str((error or {}).get("message") or outcome),
               run_status=outcome)
    return RunOutcome(run_id, outcome, code)


def _fail(store: Store, claim: Claim, code: str, message: str) -> RunOutcome:
    store.fail(claim.run_id, claim.token, code, message)
    return RunOutcome(claim.run_id, RunStatus.FAILED, code)


def fail_unwritable(store: Store, claim: Claim, exc: BundleCorrupt) -> RunOutcome:
    """Fail a run whose bundle cannot be written at all (its path a file, its lock a
    directory): the queue's failure record is then the only one, and the truth.

    Not a crash: a new worker would meet the same bundle, so the run ends at
    the first try instead of after the host's whole crash budget.
    """
    return _fail(store, claim, exc.code, exc.message)


def _load(store: Store, claim: Claim, writer: BundleWriter,
          row: QueueRow) -> LoadedWorkflow | RunOutcome:
    """The run's workflow, or the failed outcome when it no longer loads."""
    try:
        return load_workflow_file(row.source_path)
    except WorkflowLoadError as exc:
        code, message = "workflow_invalid", exc.message
        if not os.path.exists(row.source_path):
            code = "workflow_not_found"
            message = (f"the workflow file {row.source_path} of {row.workflow!r} no longer"
                       " exists; restore it or start the workflow again")
        if writer.bundle.exists():  # the bundle records the failure too
            settle_bundle(writer, "run_failed", {"code": code,
                                                 "message": safe_error_message(message)})
        return _fail(store, claim, code, message)


def _open(store: Store, claim: Claim, engine: Engine, row: QueueRow, loaded: LoadedWorkflow,
          runs_dir: Path, force: bool) -> RunOutcome | None:
    """Create the bundle or resume it; an outcome if the run does not go on."""
    source = {"path": loaded.source.path, "sha256": loaded.source.sha256}
    bundle = engine.writer.bundle

    def reopen() -> None:
        engine.reopen(source_sha256=loaded.source.sha256, digest=loaded.digest, force=force)

    try:
        if bundle.exists():
            reopen()
            return None
        if row.started_at is not None:
            # It ran before, so it had a bundle: starting over would rerun done
            # work on made-up input (the private input is gone by now). Looked
            # at twice: another writer may have laid it out just now.
            if bundle.exists():
                reopen()
                return None
            return _fail(store, claim, "bundle_missing",
                         f"run {claim.run_id} ran before but its bundle is gone (moved or"
                         " deleted); restore it to resume the run, or start a new run")
        if (loaded.source.sha256, loaded.digest) != (row.source_sha256,
                                                     row.definition_digest) and not force:
            return _fail(store, claim, "source_changed",
                         f"the workflow file {row.source_path} changed after the run was"
                         " queued; start the run again")
        run_input = store.private_input(claim.run_id, claim.token)
        parent = None
        if row.parent_run_id is not None:
            pstate = Bundle(runs_dir, row.parent_run_id).state()
            parent = {"runId": row.parent_run_id, "state": pstate, "answer": run_input}
            run_input = pstate.get("input")
        try:
            engine.create(run_input=run_input, source=source, digest=loaded.digest,
                          parent=parent)
        except BundleExists:
            # Decided outside the fence: a writer that lost its claim laid the
            # bundle out meanwhile. Resume it like any interrupted run.
            reopen()
        return None
    except ResumeRefused:
        # The bundle settled but the queue never heard: its owner died in between.
        state = bundle.raw_state()
        return settle_queue(store, claim, claim.state, str(state.get("status")),
                            state.get("error"))
    except SourceChanged as exc:
        if claim.state == Q.STARTING and row.origin_session is not None \
                and row.started_at is None:
            # A launch that never ran (seed 002): it fails, with a follow-up.
            return _fail(store, claim, exc.code, exc.message)
        # Not a failure: the run waits, parked and blocked, for a person to
        # accept the new definition (`resume --force`) or cancel it.
        _running(store, claim, claim.state)
        store.park(claim.run_id, claim.token, code=exc.code, message=exc.message)
        return RunOutcome(claim.run_id, PARKED, exc.code)
    except PiWorkflowsError as exc:
        if exc.code == "claim_lost":
            raise
        return _fail(store, claim, exc.code, exc.message)


def execute_claim(store: Store, claim: Claim, *, runs_dir: Path, project_dir: Path,
                  fsync: str = "node", control: Control | None = None,
                  agent: AgentExecutor | None = None, force: bool = False,
                  park_grace_s: float = 5.0, engine_hook: EngineHook | None = None) -> RunOutcome:
    """Run ``claim`` until its bundle settles or it is parked; update the queue to match.

    ``ClaimLost`` propagates: a runner that lost its claim must stop at once
    and write nothing more (not even to the queue).
    """
    row = store.get(claim.run_id)
    if row is None:
        raise PiWorkflowsError(f"run {claim.run_id} vanished from the queue")
    writer = BundleWriter(Bundle(runs_dir, claim.run_id), store, claim.token, fsync=fsync)
    loaded = _load(store, claim, writer, row)
    if isinstance(loaded, RunOutcome):
        return loaded
    engine = Engine(loaded.workflow, writer, store, project_dir=project_dir, control=control,
                    agent=agent, notifier=store, session_id=row.notify_session,
                    park_grace_s=park_grace_s)
    if row.error_code == PAUSED_CODE:
        # Asked for before this claim (a worker killed after the request, a
        # takeover): the request is the row's, so it holds at the first boundary.
        engine.control.request_pause()
    if engine_hook is not None:
        engine_hook(engine)
    if agent is not None and any(n.kind == "agent" for n in loaded.workflow.nodes.values()):
        warm_up(agent)  # Pi boots (about a second) while earlier nodes run
    stopped = _open(store, claim, engine, row, loaded, runs_dir, force)
    if stopped is not None:
        return stopped
    state = claim.state
    if state == Q.STARTING:
        running = store.mark_running(claim.run_id, claim.token)
        if running.cancel_requested:
            engine.control.request_cancel()  # cancel asked for while it was starting
        if running.error_code == PAUSED_CODE:
            engine.control.request_pause()
        state = Q.RUNNING
    try:
        outcome = engine.run()
    except BundleCorrupt as exc:
        # Rerunning cannot repair a bundle that lost data: fail once, clearly.
        return _fail(store, claim, exc.code, exc.message)
    presentation = None
    if row.origin_session is not None or row.notify_session is not None:
        # Rendered here, where the definition is loaded; only the store's intent keeps it.
        try:
            presentation = render(loaded.workflow.presentation_prompt, dict(engine.state),
                                  run_id=claim.run_id, workflow=row.workflow,
                                  control=engine.control, restore=engine.restore)
        except BundleCorrupt:
            presentation = None  # its result lost an artifact: nothing to present
    return settle_queue(store, claim, state, outcome, engine.state.get("error"),
                        presentation=presentation)
