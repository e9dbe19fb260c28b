"""Executing one claimed run end to end, inside whichever process owns it.

Owns the bridge between a queue claim and the engine: load and pin the
workflow, create or resume the bundle, the final activation fence
(``mark_running``), and the queue transition that matches how the engine
stopped. Imports ``protocol`` and the engine.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..protocol.bundle import Bundle, BundleCorrupt, BundleExists, BundleWriter
from ..protocol.discovery import WorkflowLoadError, load_workflow_file
from ..protocol.errors import PiWorkflowsError
from ..protocol.limits import safe_error_message
from ..protocol.settle import settle_bundle
from ..protocol.store import Claim, Store
from .agent import AgentExecutor
from .control import Control
from .engine import Engine, ResumeRefused, SourceChanged

# How each way the engine stops maps onto the queue.
QUEUE_DONE = ("completed", "waiting")


@dataclass(frozen=True)
class RunOutcome:
    run_id: str
    outcome: str  # completed | waiting | failed | timed_out | cancelled | parked
    error_code: str | None = None


def _fail(store: Store, claim: Claim, code: str, message: str) -> RunOutcome:
    store.fail(claim.run_id, claim.token, code, message)
    return RunOutcome(claim.run_id, "failed", code)


def _adopt_settled(store: Store, claim: Claim, bundle: Bundle) -> RunOutcome:
    """The bundle settled but the queue never heard: its owner died in between.

    The bundle decides; the queue is brought in line with it (a settled run
    is never resumed, and never failed for being settled).
    """
    state = bundle.raw_state()
    status = str(state.get("status"))
    if status in QUEUE_DONE:
        if claim.state == "starting":
            store.mark_running(claim.run_id, claim.token)
        store.finish(claim.run_id, claim.token)
        return RunOutcome(claim.run_id, status)
    if status == "cancelled":
        store.cancel(claim.run_id, claim.token)
        return RunOutcome(claim.run_id, status)
    error = state.get("error") or {}
    code = str(error.get("code") or status)
    store.fail(claim.run_id, claim.token, code, str(error.get("message") or status))
    return RunOutcome(claim.run_id, status, code)


def execute_claim(store: Store, claim: Claim, *, runs_dir: Path, project_dir: Path,
                  fsync: str = "node", control: Control | None = None,
                  agent: AgentExecutor | None = None, force: bool = False,
                  park_grace_s: float = 5.0, engine_hook: Any = None) -> RunOutcome:
    """Run ``claim`` until its bundle settles or it is parked; update the queue to match.

    ``ClaimLost`` propagates: a runner that lost its claim must stop at once
    and write nothing more (not even to the queue).
    """
    row = store.get(claim.run_id)
    if row is None:
        raise PiWorkflowsError(f"run {claim.run_id} vanished from the queue")
    bundle = Bundle(runs_dir, claim.run_id)
    writer = BundleWriter(bundle, store, claim.token, fsync=fsync)
    try:
        loaded = load_workflow_file(row.source_path)
    except WorkflowLoadError as exc:
        if bundle.exists():  # the bundle records the failure too
            settle_bundle(writer, "run_failed", {"code": "workflow_invalid",
                                                 "message": safe_error_message(exc.message)})
        return _fail(store, claim, "workflow_invalid", exc.message)
    engine = Engine(loaded.workflow, writer, store, project_dir=project_dir, control=control,
                    agent=agent, notifier=store, session_id=row.origin_session,
                    park_grace_s=park_grace_s)
    if engine_hook is not None:
        engine_hook(engine)
    source = {"path": loaded.source.path, "sha256": loaded.source.sha256}
    try:
        if not bundle.exists():
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
                engine.reopen(source_sha256=loaded.source.sha256, digest=loaded.digest,
                              force=force)
        else:
            engine.reopen(source_sha256=loaded.source.sha256, digest=loaded.digest, force=force)
    except ResumeRefused:
        return _adopt_settled(store, claim, bundle)
    except SourceChanged as exc:
        # Not a failure: the run waits, parked and blocked, for a person to
        # accept the new definition (`resume --force`) or cancel it.
        if claim.state == "starting":
            store.mark_running(claim.run_id, claim.token)
        store.park(claim.run_id, claim.token, code=exc.code, message=exc.message)
        return RunOutcome(claim.run_id, "parked", exc.code)
    except PiWorkflowsError as exc:
        if exc.code == "claim_lost":
            raise
        return _fail(store, claim, exc.code, exc.message)
    if claim.state == "starting" and store.mark_running(claim.run_id,
                                                        claim.token).cancel_requested:
        engine.control.request_cancel()  # cancel asked for while it was starting
    try:
        outcome = engine.run()
    except BundleCorrupt as exc:
        # Rerunning cannot repair a bundle that lost data: fail once, clearly.
        return _fail(store, claim, exc.code, exc.message)
    if outcome == "parked":
        store.park(claim.run_id, claim.token)
    elif outcome in QUEUE_DONE:
        store.finish(claim.run_id, claim.token)
    elif outcome == "cancelled":
        store.cancel(claim.run_id, claim.token)
    else:
        error = engine.state.get("error") or {}
        store.fail(claim.run_id, claim.token, str(error.get("code") or outcome),
                   str(error.get("message") or outcome))
        return RunOutcome(claim.run_id, outcome, error.get("code"))
    return RunOutcome(claim.run_id, outcome)
