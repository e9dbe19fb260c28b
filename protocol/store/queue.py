"""Run-queue operations: reservations, claims, leases and lifecycle CAS.

Owns every change to ``workflow_run_queue`` but the takeover of a dead
runner's claims (``runners.py``). Each public method is one transaction;
each state change is an ``UPDATE ... WHERE state = ? AND claim_token IS ?``
whose row count is checked. Does not import sqlite3.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from ..errors import ConflictError, PresentationPending, TransitionRefused
from ..limits import (
    encode_private_input,
    safe_error_message,
    validate_key,
    validate_run_id,
    validate_session_id,
)
from ..states import (
    CLAIMED,
    PAUSED_CODE,
    TERMINAL,
    UNOWNED,
    QueueState,
    check_transition,
    sql_list,
)
from .backend import ConstraintViolation, Tx
from .base import LAUNCH_FAILED, StoreBase, load_row, new_token
from .records import Claim, Gone, QueueRow, RunSource
from .turns import AGENT, after_cancelled, after_failed, after_finished, presentation_pending

Q = QueueState


def _conflict(
    exc: ConstraintViolation, run_id: str, origin: str | None, parent: str | None
) -> Exception:
    text = str(exc)
    if "origin_session" in text:
        return ConflictError(
            f"session {origin} already has an active run; finish or cancel it first",
            code="session_busy",
        )
    if "parent_run_id" in text:
        return ConflictError(
            f"run {parent} already has a continuation", code="continuation_exists"
        )
    if "run_id" in text:
        return ConflictError(f"run {run_id} already exists", code="run_exists")
    return exc


class QueueOps(StoreBase):
    # ---- creating rows ---------------------------------------------------

    def _insert(
        self,
        run_id: str,
        source: RunSource,
        private_input: Any,
        *,
        origin_session: str | None,
        parent_run_id: str | None,
        runner_affinity: str | None,
        claim_runner: str | None,
        notify_session: str | None = None,
        fork: tuple[str, str] | None = None,
        agent_dir: str | None = None,
        by_agent: bool = False,
        tx: Tx | None = None,
    ) -> tuple[QueueRow, Claim | None]:
        """Insert one run row; inside ``tx`` (the caller's transaction) if given,
        so a caller's own record commits with it (a controller's child run)."""
        validate_run_id(run_id)
        if parent_run_id is not None:
            validate_run_id(parent_run_id)
        if fork is not None:
            validate_run_id(fork[0])
            validate_key(fork[1], "node id")
        for value in (origin_session, notify_session):
            if value is not None:
                validate_session_id(value)
        for value in (runner_affinity, claim_runner):
            if value is not None:
                validate_key(value, "runner id")
        # A session's run reports to it unless the caller names another session.
        notify_session = notify_session or origin_session
        validate_key(source.workflow, "workflow name")
        # A fork's bundle exists before its row and holds its input already.
        encoded = None if fork is not None else encode_private_input(private_input)
        now = self._now()
        token = new_token() if claim_runner else None
        lease = now + self.lease_ms if claim_runner else None
        state = Q.STARTING if claim_runner else Q.QUEUED
        if claim_runner:
            check_transition(run_id, Q.QUEUED, Q.STARTING)  # born queued, claimed at once
        try:
            with self._db.transaction() if tx is None else contextlib.nullcontext(tx) as tx:
                if parent_run_id is not None and tx.scalar(
                        "SELECT cancel_requested FROM workflow_run_queue WHERE run_id = ?",
                        (parent_run_id,)):
                    raise ConflictError(f"run {parent_run_id} was cancelled while it waited;"
                                        " it cannot be answered", code="wait_cancelled")
                owed = None if origin_session is None else presentation_pending(
                    tx, origin_session)
                if owed is not None:
                    # The session's model is owed a turn about run `owed`'s result: a
                    # new start waits until that turn was given (issue 22, item 7).
                    raise PresentationPending(
                        f"session {origin_session} has not yet been shown the result of run"
                        f" {owed}; start again after that turn (a Pi session gives it at its"
                        f" next idle moment; elsewhere `pi-workflows sync --session"
                        f" {origin_session}` shows it)")
                tx.execute(
                    "INSERT INTO workflow_run_queue(run_id, workflow, source_path, source_sha256,"
                    " definition_digest, private_input, state, origin_session, notify_session,"
                    " runner_affinity, runner_id, claim_token, lease_expires_at, parent_run_id,"
                    " forked_from, fork_node, created_at, updated_at)"
                    " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    (run_id, source.workflow, source.source_path, source.source_sha256,
                     source.definition_digest, encoded, state, origin_session, notify_session,
                     runner_affinity or claim_runner, claim_runner, token, lease, parent_run_id,
                     *(fork or (None, None)), now, now),
                )
                self._event(tx, run_id, Q.QUEUED, now, {
                    "workflow": source.workflow, "originSession": origin_session,
                    "notifySession": notify_session, "parentRunId": parent_run_id,
                    **({"forkedFrom": fork[0], "forkNode": fork[1]} if fork else {}),
                    # The launcher's Pi agent dir (a path, never a secret): the run's,
                    # whichever runner executes it (protocol.agentenv).
                    **({"agentDir": agent_dir} if agent_dir else {}),
                    # The session's model started it (`start --by-agent`): its later
                    # failure owes the session a turn (protocol.store.turns).
                    **({"startedBy": AGENT} if by_agent else {}),
                })
                if claim_runner:
                    self._event(tx, run_id, Q.STARTING, now, {"runnerId": claim_runner,
                                                              "from": Q.QUEUED})
                row = load_row(tx, run_id)
        except ConstraintViolation as exc:
            raise _conflict(exc, run_id, origin_session, parent_run_id) from None
        claim = None
        if claim_runner and token and lease:
            claim = Claim(run_id, claim_runner, token, lease, Q.STARTING, Q.QUEUED)
        return row, claim

    def reserve(self, run_id: str, source: RunSource, private_input: Any, origin_session: str,
                *, parent_run_id: str | None = None, agent_dir: str | None = None,
                by_agent: bool = False) -> QueueRow:
        """A deferred launch: ``queued`` and bound to its origin session (seed 002).

        ``by_agent``: the session's model started it (the Pi tool's ``start``).
        """
        return self._insert(run_id, source, private_input, origin_session=origin_session,
                            parent_run_id=parent_run_id, runner_affinity=None,
                            claim_runner=None, agent_dir=agent_dir, by_agent=by_agent)[0]

    def enqueue_detached(self, run_id: str, source: RunSource, private_input: Any, *,
                         parent_run_id: str | None = None,
                         runner_affinity: str | None = None,
                         notify_session: str | None = None,
                         fork: tuple[str, str] | None = None,
                         agent_dir: str | None = None) -> QueueRow:
        """A run for any runner (the host): ``queued`` with no origin session.

        ``notify_session`` (``answer --session``) receives its notifications
        without owning it. ``fork`` is ``(original run, node)`` for a fork,
        whose bundle (with its input) the caller laid out already.
        """
        return self._insert(run_id, source, private_input, origin_session=None,
                            parent_run_id=parent_run_id, runner_affinity=runner_affinity,
                            claim_runner=None, notify_session=notify_session, fork=fork,
                            agent_dir=agent_dir)[0]

    def insert_and_claim(self, run_id: str, source: RunSource, private_input: Any,
                         runner_id: str, *, origin_session: str | None = None,
                         parent_run_id: str | None = None,
                         agent_dir: str | None = None) -> Claim:
        """Create a run already ``starting`` and owned by ``runner_id`` (one transaction)."""
        claim = self._insert(run_id, source, private_input, origin_session=origin_session,
                             parent_run_id=parent_run_id, runner_affinity=None,
                             claim_runner=runner_id, agent_dir=agent_dir)[1]
        assert claim is not None
        return claim

    # ---- the claim holder's operations ------------------------------------

    def _move(self, run_id: str, token: str | None, to_state: QueueState, *,
              sets: str = "", params: tuple[Any, ...] = (),
              payload: dict[str, Any] | None = None,
              token_states: frozenset[QueueState] | None = None,
              after: Callable[[Tx, QueueRow, int], None] | None = None) -> QueueRow:
        """One lifecycle transition as a checked compare-and-set.

        With ``token_states``, the token is required (and checked) only when
        the row is in one of those states, decided inside the transaction.
        ``after(tx, row before, now)`` writes what must commit with the move.
        """
        validate_run_id(run_id)
        now = self._now()
        with self._db.transaction() as tx:
            row = load_row(tx, run_id)
            if token_states is not None:
                if row.state not in token_states:
                    token = None
                elif token is None:
                    raise TransitionRefused(
                        f"run {run_id} is {row.state}; only its owner can make it {to_state}"
                        + (" (use request_cancel)" if to_state == Q.CANCELLED else ""))
            if token is not None:
                row = self._owned(tx, run_id, token)
            check_transition(run_id, row.state, to_state)
            claim_sql = "" if to_state in CLAIMED else (
                ", runner_id = NULL, claim_token = NULL, lease_expires_at = NULL")
            # Seed 002: private input lives only until the run is under way or over.
            clears_input = to_state in (Q.RUNNING, Q.FAILED, Q.CANCELLED)
            ends = to_state in TERMINAL
            changed = tx.execute(
                "UPDATE workflow_run_queue SET state = ?, updated_at = ?" + claim_sql
                + (", private_input = NULL" if clears_input else "")
                + (", finished_at = ?" if ends else "")
                + sets + " WHERE run_id = ? AND state = ? AND claim_token IS ?",
                (to_state, now, *((now,) if ends else ()), *params, run_id, row.state,
                 row.claim_token),
            )
            if changed != 1:
                raise TransitionRefused(f"run {run_id} changed concurrently; {to_state} refused")
            self._event(tx, run_id, to_state, now, {"from": row.state, **(payload or {})})
            if after is not None:
                after(tx, row, now)
            if ends:
                self._after_run_ended(tx, run_id, to_state, now)
            return load_row(tx, run_id)

    def mark_running(self, run_id: str, token: str) -> QueueRow:
        """The final activation fence: ``starting -> running``; clears private input."""
        return self._move(run_id, token, Q.RUNNING,
                          sets=", started_at = coalesce(started_at, ?)", params=(self._now(),))

    def park(self, run_id: str, token: str, *, code: str | None = None,
             message: str | None = None) -> QueueRow:
        """``running -> parked``: release the claim without a terminal state.

        With ``code`` the run is parked *blocked*: no runner claims it until a
        person acts (``resume --force`` unblocks it, ``cancel`` ends it).
        """
        if code is None:
            return self._move(run_id, token, Q.PARKED)
        validate_key(code, "error code")
        safe = safe_error_message(message or code)
        return self._move(run_id, token, Q.PARKED, sets=", error_code = ?, error_message = ?",
                          params=(code, safe), payload={"errorCode": code})

    def finish(self, run_id: str, token: str, run_status: str | None = None, *,
               presentation: str | None = None) -> QueueRow:
        """``running -> done``; the feed records how the bundle ended (completed or waiting).

        ``presentation``, the workflow's rendered presentation message, becomes
        the session's presentation turn intent in the same transaction (only
        there: never in the feed).
        """
        def present(tx: Tx, before: QueueRow, now: int) -> None:
            after_finished(tx, before, run_status, presentation, now)

        # A pause asked for after the last boundary has nothing left to hold.
        return self._move(run_id, token, Q.DONE,
                          sets=", error_code = NULL, error_message = NULL",
                          payload=None if run_status is None else {"runStatus": run_status},
                          after=present)

    def fail(self, run_id: str, token: str, code: str, message: str, *,
             run_status: str | None = None) -> QueueRow:
        """``starting|running -> failed`` with a safe, bounded error.

        The feed event carries only the code: an author's message may still
        echo run input that redaction does not recognise.
        """
        validate_key(code, "error code")
        safe = safe_error_message(message)

        def launch_failed(tx: Tx, before: QueueRow, now: int) -> None:
            # A deferred launch that fails before it runs owes its session one
            # follow-up turn (seed 002), durable in the same transaction.
            if before.state == Q.STARTING and before.origin_session is not None \
                    and before.started_at is None:
                self._add_turn_intent(tx, before.origin_session, run_id, LAUNCH_FAILED, code, {
                    "workflow": before.workflow, "runId": run_id, "state": Q.FAILED,
                    "errorCode": code, "error": safe}, now)
            else:  # one that ran: a turn only if the session's model started it
                after_failed(tx, before, code, safe, run_status, now)

        return self._move(run_id, token, Q.FAILED, sets=", error_code = ?, error_message = ?",
                          params=(code, safe), payload={"errorCode": code}, after=launch_failed)

    def cancel(self, run_id: str, token: str | None = None, *,
               by_session: str | None = None) -> QueueRow:
        """Cancel a queued, starting or parked run (anyone) or a running one (its owner).

        Cancelling ``starting`` clears the claim, so the activation fence of
        whoever was starting it fails: a race cannot release the executor after
        cancellation wins. ``by_session``: the model of that session asked for
        it, so the session is owed one turn once the run is cancelled (as it is
        when an owner carries out a model's ``request_cancel``).
        """
        if by_session is not None:
            validate_session_id(by_session)

        def agent_turn(tx: Tx, before: QueueRow, now: int) -> None:
            after_cancelled(tx, before, by_session, now)

        # The state is read inside the move's transaction: a run that becomes
        # running meanwhile is not cancelled without its owner's token.
        return self._move(run_id, token, Q.CANCELLED, sets=", error_code = 'cancelled'",
                          token_states=frozenset({Q.RUNNING}), after=agent_turn)

    def unblock(self, run_id: str) -> QueueRow:
        """Clear a parked run's blocking error (``resume --force``), so runners take it again."""
        validate_run_id(run_id)
        now = self._now()
        with self._db.transaction() as tx:
            if tx.execute("UPDATE workflow_run_queue SET error_code = NULL, error_message = NULL,"
                          " updated_at = ? WHERE run_id = ? AND state = ? AND claim_token IS NULL",
                          (now, run_id, Q.PARKED)) != 1:
                raise TransitionRefused(f"run {run_id} is not parked")
            self._event(tx, run_id, "unblocked", now, {})
            return load_row(tx, run_id)

    def request_pause(self, run_id: str) -> QueueRow:
        """Pause a run: a queued or parked one at once, a claimed one at its next boundary.

        One compare-and-set on the row's state, claim and error code (see
        ``states.PAUSED_CODE``): the state never changes here. Asking again
        is a no-op; a parked run blocked for another reason, or one that
        ended, is refused.
        """
        validate_run_id(run_id)
        now = self._now()
        with self._db.transaction() as tx:
            row = load_row(tx, run_id)
            if row.error_code == PAUSED_CODE and row.state not in TERMINAL:
                return row
            if row.state in TERMINAL:
                raise TransitionRefused(f"run {run_id} is {row.state}; only a queued, parked or"
                                        " running run can be paused", code="run_settled")
            if row.error_code is not None:
                raise TransitionRefused(f"run {run_id} is {row.state} and blocked"
                                        f" ({row.error_code}); nothing runs it until that is"
                                        " resolved", code="run_blocked")
            held = row.state in UNOWNED
            if tx.execute("UPDATE workflow_run_queue SET error_code = ?, error_message = ?,"
                          " updated_at = ? WHERE run_id = ? AND state = ? AND claim_token IS ?"
                          " AND error_code IS NULL",
                          (PAUSED_CODE, "paused by request" if held else "pause requested",
                           now, run_id, row.state, row.claim_token)) != 1:
                raise TransitionRefused(f"run {run_id} changed concurrently; pause refused")
            self._event(tx, run_id, "paused" if held else "pause_requested", now,
                        {"state": row.state})
            return load_row(tx, run_id)

    def unpause(self, run_id: str) -> QueueRow:
        """Lift a pause (``resume``): a held run is free for runners again, a pending
        request is withdrawn. One compare-and-set; refused if the run is not paused."""
        validate_run_id(run_id)
        now = self._now()
        with self._db.transaction() as tx:
            row = load_row(tx, run_id)
            if row.error_code != PAUSED_CODE or row.state in TERMINAL:
                raise TransitionRefused(f"run {run_id} is {row.state}, not paused",
                                        code="not_paused")
            if tx.execute("UPDATE workflow_run_queue SET error_code = NULL, error_message = NULL,"
                          " updated_at = ? WHERE run_id = ? AND state = ? AND claim_token IS ?"
                          " AND error_code = ?",
                          (now, run_id, row.state, row.claim_token, PAUSED_CODE)) != 1:
                raise TransitionRefused(f"run {run_id} changed concurrently; resume refused")
            self._event(tx, run_id, "unpaused", now, {"state": row.state})
            return load_row(tx, run_id)

    def close_wait(self, run_id: str) -> QueueRow:
        """Cancel a run waiting at a checkpoint: its wait is closed for good.

        Seed 002's transitions stay as they are, so the row stays ``done``
        (the bundle keeps its ``waiting`` record); the cancel flag, set in
        the same transaction that proves no continuation exists, closes the
        wait: a later answer is refused (``wait_cancelled``) and views show
        the run cancelled. Cancelling again is a no-op.
        """
        validate_run_id(run_id)
        now = self._now()
        with self._db.transaction() as tx:
            row = load_row(tx, run_id)
            if row.state != Q.DONE:
                raise TransitionRefused(f"run {run_id} is {row.state}, not waiting")
            if row.cancel_requested:
                return row
            child = tx.scalar(
                "SELECT run_id FROM workflow_run_queue WHERE parent_run_id = ? AND state NOT IN "
                + sql_list((Q.FAILED, Q.CANCELLED)) + " ORDER BY created_at LIMIT 1", (run_id,))
            if child is not None:
                raise TransitionRefused(f"run {run_id} was already answered: its continuation"
                                        f" is {child} (cancel that run instead)")
            if tx.execute("UPDATE workflow_run_queue SET cancel_requested = 1, error_code ="
                          " 'cancelled', error_message = 'cancelled while waiting',"
                          " updated_at = ? WHERE run_id = ? AND state = ? AND"
                          " cancel_requested = 0", (now, run_id, Q.DONE)) != 1:
                raise TransitionRefused(f"run {run_id} changed concurrently")
            self._event(tx, run_id, Q.CANCELLED, now, {"from": Q.DONE, "waitCancelled": True})
            return load_row(tx, run_id)

    def request_cancel(self, run_id: str, *, by_session: str | None = None) -> QueueRow:
        """Flag a starting or running run; its owner cancels it at its next renewal.

        For a ``starting`` run that is resuming a bundle, this (not ``cancel``)
        lets the owner write the terminal event, so bundle and queue agree.
        ``by_session`` (the model of that session asked) is recorded in the
        request's feed event: the cancel, once carried out, owes it a turn.
        """
        validate_run_id(run_id)
        if by_session is not None:
            validate_session_id(by_session)
        now = self._now()
        with self._db.transaction() as tx:
            row = load_row(tx, run_id)
            if row.state not in CLAIMED:
                raise TransitionRefused(f"run {run_id} is {row.state}, not running")
            if tx.execute("UPDATE workflow_run_queue SET cancel_requested = 1, updated_at = ?"
                          " WHERE run_id = ? AND state = ?", (now, run_id, row.state)) != 1:
                raise TransitionRefused(f"run {run_id} changed concurrently")
            self._event(tx, run_id, "cancel_requested", now,
                        {} if by_session is None else {"bySession": by_session})
            return load_row(tx, run_id)

    def requeue_expired_starting(self, run_id: str, *, gone: Gone | None = None) -> QueueRow:
        """``starting -> queued`` when no bundle exists and the claim may be taken
        from its holder: proven gone (``gone``), or watched by this process go a
        lease of its monotonic time without progress (never by the wall clock)."""
        return self._requeue(run_id, None, "runner_dead" if gone else "lease_expired", gone)

    def release_starting(self, run_id: str, token: str) -> QueueRow:
        """``starting -> queued`` by the claim holder itself, before any bundle exists."""
        return self._requeue(run_id, token, "released")

    def _requeue(self, run_id: str, token: str | None, reason: str,
                 gone: Gone | None = None) -> QueueRow:
        validate_run_id(run_id)
        now = self._now()
        with self._db.transaction() as tx:
            row = self._owned(tx, run_id, token) if token else load_row(tx, run_id)
            if row.state != Q.STARTING or (token is None and not self._may_take(tx, row, gone)):
                raise TransitionRefused(f"run {run_id} is not a starting run whose holder is"
                                        " gone" if token is None else f"run {run_id} is not"
                                        " starting")
            check_transition(run_id, row.state, Q.QUEUED)
            changed = tx.execute(
                "UPDATE workflow_run_queue SET state = ?, runner_id = NULL,"
                " claim_token = NULL, lease_expires_at = NULL, updated_at = ?"
                " WHERE run_id = ? AND state = ? AND claim_token IS ? AND lease_expires_at IS ?",
                (Q.QUEUED, now, run_id, row.state, row.claim_token, row.lease_expires_at))
            if changed != 1:
                raise TransitionRefused(f"run {run_id} changed concurrently")
            self._event(tx, run_id, Q.QUEUED, now, {"from": Q.STARTING, "reason": reason})
            return load_row(tx, run_id)

    def delete_unstarted_continuation(self, run_id: str, token: str) -> None:
        """Remove a continuation that failed before its bundle existed (frees the parent)."""
        now = self._now()
        with self._db.transaction() as tx:
            row = self._owned(tx, run_id, token)
            if row.parent_run_id is None or row.state != Q.STARTING:
                raise TransitionRefused(f"run {run_id} is not an unstarted continuation")
            if tx.execute("DELETE FROM workflow_run_queue WHERE run_id = ? AND state = ?"
                          " AND claim_token = ?", (run_id, Q.STARTING, token)) != 1:
                raise TransitionRefused(f"run {run_id} changed concurrently")
            self._event(tx, run_id, "deleted", now, {"parentRunId": row.parent_run_id})
