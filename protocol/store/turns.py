"""Which ends of a run owe a session one later model turn (issue 22, items 6 and 7).

Owns the source events of the turn intents a run's end creates beyond seed
002's failed launch (a model-started run that failed or timed out after it
started, a cancel the session's model asked for, a presentation, a claim
lost while a conversation step was pending), the durable markers they are
decided by, and the one rule that writes such an intent inside the caller's
transaction, at most once. The markers live in payloads of ``run_events``
rows the store writes anyway (``queued``: ``startedBy``; ``cancel_requested``:
``bySession``), so the store's layout stays ``v1``. Imports the store's
``base``, ``db`` and ``records`` and ``protocol.states``; no sqlite3; must
not import the worker or the supervisor.
"""

from __future__ import annotations

import json
from typing import Any

from ..states import ACTIVE, QueueState
from .backend import Tx
from .base import StoreBase
from .records import QueueRow

Q = QueueState

# Source events of turn intents (``workflow_turn_intents.source_event``).
RUN_FAILED = "run_failed"  # a model-started run failed or timed out after it started
AGENT_CANCELLED = "agent_cancelled"  # the model of a session cancelled the run
PRESENTATION = "presentation"  # a run of the session ended completed/waiting: present it
CLAIM_LOST = "claim_lost"  # the session lost its claim while a conversation step was pending
AGENT = "agent"  # the ``startedBy`` of a run the model started (``start --by-agent``)


def _payload(raw: Any) -> dict[str, Any]:
    try:
        value = json.loads(raw) if isinstance(raw, str) else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def started_by_agent(tx: Tx, run_id: str) -> bool:
    """Inside the caller's transaction: did a session's model start ``run_id``?

    Read from the run's first ``queued`` event, written with the row.
    """
    raw = tx.scalar("SELECT payload FROM run_events WHERE run_id = ? AND type = ?"
                    " ORDER BY seq LIMIT 1", (run_id, Q.QUEUED))
    return _payload(raw).get("startedBy") == AGENT


def cancel_requester(tx: Tx, run_id: str) -> str | None:
    """The session whose model asked for the run's cancel, if the latest request was one.

    A person's request after the model's (no ``bySession``) takes the turn away.
    """
    raw = tx.scalar("SELECT payload FROM run_events WHERE run_id = ? AND type ="
                    " 'cancel_requested' ORDER BY seq DESC LIMIT 1", (run_id,))
    by = _payload(raw).get("bySession")
    return by if isinstance(by, str) and by else None


def presentation_pending(tx: Tx, session_id: str) -> str | None:
    """The run whose presentation turn ``session_id`` still owes, if any."""
    value = tx.scalar("SELECT run_id FROM workflow_turn_intents WHERE session_id = ? AND"
                      " source_event = ? AND state = 'pending' ORDER BY created_at LIMIT 1",
                      (session_id, PRESENTATION))
    return None if value is None else str(value)


# Pending intents a natural turn about the same run makes moot: the next step
# message or the run's presentation tells the model where things stand.
SUPERSEDED_BY_A_NATURAL_TURN = (CLAIM_LOST,)


def supersede(tx: Tx, session_id: str, run_id: str, now: int) -> int:
    """Inside the caller's transaction: resolve the run's moot pending intents, unleased only.

    One being delivered right now (leased) is left to its delivery, so the
    session never gets it half-resolved. Returns how many were resolved.
    """
    marks = ",".join("?" * len(SUPERSEDED_BY_A_NATURAL_TURN))
    return tx.execute(
        "UPDATE workflow_turn_intents SET state = 'resolved', resolved_at = ? WHERE"
        " session_id = ? AND run_id = ? AND state = 'pending' AND (claim_token IS NULL"
        f" OR claim_expires_at <= ?) AND source_event IN ({marks})",
        (now, session_id, run_id, now, *SUPERSEDED_BY_A_NATURAL_TURN))


def owe_turn(tx: Tx, session_id: str, run_id: str, source_event: str, cause: str,
             payload: dict[str, Any], now: int) -> bool:
    """Inside the caller's transaction: one intent for this end of the run, at most once.

    Deterministic (``intent_id_for``): asked again (a second settle, a retry
    after a crash) it finds the first and creates nothing. A run already
    owing the session a turn (one pending intent per run and session) keeps
    that one: the session gets one turn, and the lifecycle move that asked
    never fails for it; but a presentation, a natural turn about the run,
    resolves a moot one (``supersede``) and is owed instead. True if it
    created the intent.
    """
    if source_event == PRESENTATION:
        supersede(tx, session_id, run_id, now)
    if tx.one("SELECT 1 FROM workflow_turn_intents WHERE run_id = ? AND session_id = ?"
              " AND state = 'pending'", (run_id, session_id)):
        return False
    return StoreBase._add_turn_intent(tx, session_id, run_id, source_event, cause, payload,
                                      now)[1]


def after_failed(tx: Tx, before: QueueRow, code: str, error: str, run_status: str | None,
                 now: int) -> None:
    """A model-started run that had started (not a launch: seed 002 owns those) failed."""
    session = before.origin_session
    if session is None or (before.started_at is None and before.state == Q.STARTING):
        return
    if not started_by_agent(tx, before.run_id):
        return
    owe_turn(tx, session, before.run_id, RUN_FAILED, code, {
        "workflow": before.workflow, "runId": before.run_id, "state": Q.FAILED,
        "runStatus": run_status or Q.FAILED, "errorCode": code, "error": error}, now)


def after_cancelled(tx: Tx, before: QueueRow, by_session: str | None, now: int) -> None:
    """A run ended cancelled: a turn for the session whose model asked for it, if one did.

    Only for a run that was active (queued, starting or running) when the
    model asked: cancelling a parked or paused run is answered in the tool
    call itself, and nothing of it was still going on. A request carried
    out later by the run's owner (``request_cancel``: always on a claimed,
    so active, row) is found in the feed.
    """
    if by_session is not None and before.state not in ACTIVE:
        return
    session = by_session or cancel_requester(tx, before.run_id)
    if session is None:
        return  # a person's cancel (`/workflow cancel`, `pi-workflows cancel`): no turn
    owe_turn(tx, session, before.run_id, AGENT_CANCELLED, Q.CANCELLED, {
        "workflow": before.workflow, "runId": before.run_id, "state": Q.CANCELLED}, now)


def after_finished(tx: Tx, before: QueueRow, run_status: str | None, presentation: str | None,
                   now: int) -> None:
    """A run of a session ended completed or waiting with a rendered presentation."""
    session = before.origin_session or before.notify_session
    if presentation is None or session is None:
        return
    owe_turn(tx, session, before.run_id, PRESENTATION, run_status or "completed", {
        "workflow": before.workflow, "runId": before.run_id, "runStatus": run_status,
        "message": presentation}, now)
