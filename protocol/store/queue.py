"""Run-queue operations: reservations, claims, leases and lifecycle CAS.

Owns every change to ``workflow_run_queue`` but the takeover of a dead
runner's claims (``runners.py``). Each public method is one transaction;
each state change is an ``UPDATE ... WHERE state = ? AND claim_token IS ?``
whose row count is checked. Does not import sqlite3.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..errors import ClaimLost, ConflictError, NotFound, TransitionRefused
from ..limits import encode_private_input, safe_error_message, validate_key, validate_run_id
from ..states import (
    ACTIVE,
    CLAIMED,
    TERMINAL,
    UNOWNED,
    QueueState,
    check_transfer,
    check_transition,
    sql_list,
)
from .base import StoreBase, new_token
from .db import ConstraintViolation, Tx
from .records import Claim, QueueRow, Renewal, RunSource

_SELECT = "SELECT * FROM workflow_run_queue WHERE run_id = ?"
Q = QueueState
_ACTIVE, _CLAIMED = sql_list(ACTIVE), sql_list(CLAIMED)
_SESSION_FREE = (
    "(origin_session IS NULL OR NOT EXISTS (SELECT 1 FROM workflow_run_queue AS busy"
    " WHERE busy.origin_session = workflow_run_queue.origin_session"
    f" AND busy.state IN {_ACTIVE}))"
)


def _load(tx: Tx, run_id: str) -> QueueRow:
    row = tx.one(_SELECT, (run_id,))
    if row is None:
        raise NotFound(f"no run {run_id} in the queue", code="run_not_found")
    return QueueRow.from_row(row)


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
    ) -> tuple[QueueRow, Claim | None]:
        validate_run_id(run_id)
        if parent_run_id is not None:
            validate_run_id(parent_run_id)
        for value, what in ((origin_session, "session id"), (runner_affinity, "runner id"),
                            (claim_runner, "runner id")):
            if value is not None:
                validate_key(value, what)
        validate_key(source.workflow, "workflow name")
        encoded = encode_private_input(private_input)
        now = self._now()
        token = new_token() if claim_runner else None
        lease = now + self.lease_ms if claim_runner else None
        state = Q.STARTING if claim_runner else Q.QUEUED
        if claim_runner:
            check_transition(run_id, Q.QUEUED, Q.STARTING)  # born queued, claimed at once
        try:
            with self._db.transaction() as tx:
                tx.execute(
                    "INSERT INTO workflow_run_queue(run_id, workflow, source_path, source_sha256,"
                    " definition_digest, private_input, state, origin_session, runner_affinity,"
                    " runner_id, claim_token, lease_expires_at, parent_run_id, created_at,"
                    " updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    (run_id, source.workflow, source.source_path, source.source_sha256,
                     source.definition_digest, encoded, state, origin_session,
                     runner_affinity or claim_runner, claim_runner, token, lease, parent_run_id,
                     now, now),
                )
                self._event(tx, run_id, Q.QUEUED, now, {
                    "workflow": source.workflow, "originSession": origin_session,
                    "parentRunId": parent_run_id,
                })
                if claim_runner:
                    self._event(tx, run_id, Q.STARTING, now, {"runnerId": claim_runner,
                                                              "from": Q.QUEUED})
                row = _load(tx, run_id)
        except ConstraintViolation as exc:
            raise _conflict(exc, run_id, origin_session, parent_run_id) from None
        claim = None
        if claim_runner and token and lease:
            claim = Claim(run_id, claim_runner, token, lease, Q.STARTING, Q.QUEUED)
        return row, claim

    def reserve(self, run_id: str, source: RunSource, private_input: Any, origin_session: str,
                *, parent_run_id: str | None = None) -> QueueRow:
        """A deferred launch: ``queued`` and bound to its origin session (seed 002)."""
        return self._insert(run_id, source, private_input, origin_session=origin_session,
                            parent_run_id=parent_run_id, runner_affinity=None,
                            claim_runner=None)[0]

    def enqueue_detached(self, run_id: str, source: RunSource, private_input: Any, *,
                         parent_run_id: str | None = None,
                         runner_affinity: str | None = None) -> QueueRow:
        """A run for any runner (the host): ``queued`` with no origin session."""
        return self._insert(run_id, source, private_input, origin_session=None,
                            parent_run_id=parent_run_id, runner_affinity=runner_affinity,
                            claim_runner=None)[0]

    def insert_and_claim(self, run_id: str, source: RunSource, private_input: Any,
                         runner_id: str, *, origin_session: str | None = None,
                         parent_run_id: str | None = None) -> Claim:
        """Create a run already ``starting`` and owned by ``runner_id`` (one transaction)."""
        claim = self._insert(run_id, source, private_input, origin_session=origin_session,
                             parent_run_id=parent_run_id, runner_affinity=None,
                             claim_runner=runner_id)[1]
        assert claim is not None
        return claim

    # ---- claiming -------------------------------------------------------

    def _take(self, tx: Tx, row: QueueRow, runner_id: str, now: int) -> Claim:
        """CAS one eligible row to a fresh claim owned by ``runner_id``."""
        token = new_token()
        lease = now + self.lease_ms
        params: tuple[int, ...]
        if row.state in UNOWNED:
            check_transition(row.run_id, row.state, Q.STARTING)
            new_state, kind = Q.STARTING, Q.STARTING.value
            sets, where, params = ", error_code = NULL, error_message = NULL", "", ()
        else:
            check_transfer(row.run_id, row.state)
            new_state, kind = Q(row.state), "claim_taken_over"
            sets, where, params = "", " AND lease_expires_at <= ?", (now,)
        changed = tx.execute(
            "UPDATE workflow_run_queue SET state = ?, runner_id = ?, claim_token = ?,"
            " lease_expires_at = ?, updated_at = ?" + sets + " WHERE run_id = ? AND state = ?"
            " AND claim_token IS ?" + where,
            (new_state, runner_id, token, lease, now, row.run_id, row.state, row.claim_token,
             *params),
        )
        if changed != 1:
            raise TransitionRefused(f"run {row.run_id} changed while it was being claimed")
        self._event(tx, row.run_id, kind, now, {"runnerId": runner_id, "from": row.state,
                                                "previousRunner": row.runner_id})
        return Claim(row.run_id, runner_id, token, lease, new_state, row.state)

    def claim_by_id(self, run_id: str, runner_id: str, *, session: str | None = None) -> Claim:
        """Claim one named run: queued/parked, or a starting/running one whose lease expired."""
        validate_run_id(run_id)
        validate_key(runner_id, "runner id")
        now = self._now()
        try:
            with self._db.transaction() as tx:
                row = _load(tx, run_id)
                if row.origin_session is not None and session not in (None, row.origin_session) \
                        and row.state in (Q.QUEUED, Q.STARTING):
                    raise TransitionRefused(
                        f"run {run_id} belongs to session {row.origin_session}", code="not_owner")
                if row.state in CLAIMED and (row.lease_expires_at or 0) > now:
                    raise TransitionRefused(
                        f"run {run_id} is {row.state} and owned by runner {row.runner_id}",
                        code="claimed_elsewhere")
                return self._take(tx, row, runner_id, now)
        except ConstraintViolation:
            # parked -> starting re-enters the origin session's one active slot.
            raise ConflictError(
                f"run {run_id} cannot resume while its session has another active run;"
                " finish or cancel that run first", code="session_busy") from None

    def claim_next(self, runner_id: str, *, session: str | None = None) -> Claim | None:
        """Claim the next eligible run: runner affinity first, then the oldest.

        Without ``session`` the caller is a host: it never takes a session's
        unactivated ``queued`` row or an origin-bound ``starting`` row. With
        ``session`` only that session's rows and unowned rows are eligible.
        """
        validate_key(runner_id, "runner id")
        now = self._now()
        if session is None:
            own = "origin_session IS NULL"
            params: tuple[Any, ...] = ()
            parked_own = "1"
            parked_params: tuple[Any, ...] = ()
            expired = f"(state = '{Q.RUNNING}' OR origin_session IS NULL)"
        else:
            own = "(origin_session IS NULL OR origin_session = ?)"
            params = (session,)
            parked_own, parked_params = own, params
            expired = own
        # Resuming a parked run re-enters its origin session's one active slot
        # (the reservation index): skip it while that session has another run.
        # A parked run carrying an error code waits for a person (for example
        # its workflow file changed: `resume --force`); no runner takes it.
        parked_own = f"{parked_own} AND {_SESSION_FREE} AND error_code IS NULL"
        eligible = (
            f"((state = '{Q.QUEUED}' AND {own}) OR (state = '{Q.PARKED}' AND {parked_own})"
            f" OR (state IN {_CLAIMED} AND lease_expires_at <= ? AND {expired}))"
        )
        eligible_params = (*params, *parked_params, now, *(params if session else ()))
        queries: Sequence[tuple[str, tuple[Any, ...]]] = (
            (f"SELECT * FROM workflow_run_queue WHERE runner_affinity = ? AND {eligible}"
             " ORDER BY created_at, run_id LIMIT 1", (runner_id, *eligible_params)),
            (f"SELECT * FROM workflow_run_queue WHERE state = '{Q.QUEUED}' AND {own}"
             " ORDER BY created_at, run_id LIMIT 1", params),
            (f"SELECT * FROM workflow_run_queue WHERE state = '{Q.PARKED}' AND {parked_own}"
             " ORDER BY created_at, run_id LIMIT 1", parked_params),
            ("SELECT * FROM workflow_run_queue WHERE lease_expires_at <= ? AND state IN"
             f" {_CLAIMED} AND {expired} ORDER BY created_at, run_id LIMIT 1",
             (now, *(params if session else ()))),
        )
        with self._db.transaction() as tx:
            found = tx.one(*queries[0])
            if found is None:
                candidates = [r for q in queries[1:] if (r := tx.one(*q)) is not None]
                if not candidates:
                    return None
                found = min(candidates, key=lambda r: (r["created_at"], r["run_id"]))
            return self._take(tx, QueueRow.from_row(found), runner_id, now)

    # ---- the claim holder's operations ------------------------------------

    def _owned(self, tx: Tx, run_id: str, token: str, now: int) -> QueueRow:
        row = _load(tx, run_id)
        if (row.claim_token is None or row.claim_token != token
                or (row.lease_expires_at or 0) <= now):
            raise ClaimLost(f"the claim on run {run_id} is no longer held (state {row.state})")
        return row

    def _move(self, run_id: str, token: str | None, to_state: QueueState, *,
              sets: str = "", params: tuple[Any, ...] = (),
              payload: dict[str, Any] | None = None,
              token_states: frozenset[QueueState] | None = None) -> QueueRow:
        """One lifecycle transition as a checked compare-and-set.

        With ``token_states``, the token is required (and checked) only when
        the row is in one of those states, decided inside the transaction.
        """
        validate_run_id(run_id)
        now = self._now()
        with self._db.transaction() as tx:
            row = _load(tx, run_id)
            if token_states is not None:
                if row.state not in token_states:
                    token = None
                elif token is None:
                    raise TransitionRefused(
                        f"run {run_id} is {row.state}; only its owner can make it {to_state}"
                        + (" (use request_cancel)" if to_state == Q.CANCELLED else ""))
            if token is not None:
                row = self._owned(tx, run_id, token, now)
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
            return _load(tx, run_id)

    def mark_running(self, run_id: str, token: str) -> QueueRow:
        """The final activation fence: ``starting -> running``; clears private input."""
        return self._move(run_id, token, Q.RUNNING,
                          sets=", started_at = coalesce(started_at, ?)", params=(self._now(),))

    def park(self, run_id: str, token: str, *, code: str | None = None,
             message: str | None = None) -> QueueRow:
        """``running -> parked``: release the claim without a terminal state.

        With ``code`` the run is parked *blocked*: no runner claims it until a
        person acts (``claim_by_id`` still can, which is what ``resume`` does).
        """
        if code is None:
            return self._move(run_id, token, Q.PARKED)
        validate_key(code, "error code")
        safe = safe_error_message(message or code)
        return self._move(run_id, token, Q.PARKED, sets=", error_code = ?, error_message = ?",
                          params=(code, safe), payload={"errorCode": code})

    def finish(self, run_id: str, token: str) -> QueueRow:
        return self._move(run_id, token, Q.DONE)

    def fail(self, run_id: str, token: str, code: str, message: str) -> QueueRow:
        """``starting|running -> failed`` with a safe, bounded error.

        The feed event carries only the code: an author's message may still
        echo run input that redaction does not recognise.
        """
        validate_key(code, "error code")
        safe = safe_error_message(message)
        return self._move(run_id, token, Q.FAILED, sets=", error_code = ?, error_message = ?",
                          params=(code, safe), payload={"errorCode": code})

    def cancel(self, run_id: str, token: str | None = None) -> QueueRow:
        """Cancel a queued, starting or parked run (anyone) or a running one (its owner).

        Cancelling ``starting`` clears the claim, so the activation fence of
        whoever was starting it fails: a race cannot release the executor after
        cancellation wins.
        """
        # The state is read inside the move's transaction: a run that becomes
        # running meanwhile is not cancelled without its owner's token.
        return self._move(run_id, token, Q.CANCELLED, sets=", error_code = 'cancelled'",
                          token_states=frozenset({Q.RUNNING}))

    def request_cancel(self, run_id: str) -> QueueRow:
        """Flag a starting or running run; its owner cancels it at its next renewal.

        For a ``starting`` run that is resuming a bundle, this (not ``cancel``)
        lets the owner write the terminal event, so bundle and queue agree.
        """
        validate_run_id(run_id)
        now = self._now()
        with self._db.transaction() as tx:
            row = _load(tx, run_id)
            if row.state not in CLAIMED:
                raise TransitionRefused(f"run {run_id} is {row.state}, not running")
            if tx.execute("UPDATE workflow_run_queue SET cancel_requested = 1, updated_at = ?"
                          " WHERE run_id = ? AND state = ?", (now, run_id, row.state)) != 1:
                raise TransitionRefused(f"run {run_id} changed concurrently")
            self._event(tx, run_id, "cancel_requested", now, {})
            return _load(tx, run_id)

    def requeue_expired_starting(self, run_id: str) -> QueueRow:
        """``starting -> queued`` when the lease expired and no bundle exists."""
        return self._requeue(run_id, None, "lease_expired")

    def release_starting(self, run_id: str, token: str) -> QueueRow:
        """``starting -> queued`` by the claim holder itself, before any bundle exists."""
        return self._requeue(run_id, token, "released")

    def _requeue(self, run_id: str, token: str | None, reason: str) -> QueueRow:
        validate_run_id(run_id)
        now = self._now()
        with self._db.transaction() as tx:
            row = self._owned(tx, run_id, token, now) if token else _load(tx, run_id)
            if row.state != Q.STARTING or (token is None and (row.lease_expires_at or 0) > now):
                raise TransitionRefused(f"run {run_id} is not a starting run with an expired lease"
                                        if token is None else f"run {run_id} is not starting")
            check_transition(run_id, row.state, Q.QUEUED)
            changed = tx.execute(
                "UPDATE workflow_run_queue SET state = ?, runner_id = NULL,"
                " claim_token = NULL, lease_expires_at = NULL, updated_at = ?"
                " WHERE run_id = ? AND state = ? AND claim_token IS ?",
                (Q.QUEUED, now, run_id, row.state, row.claim_token))
            if changed != 1:
                raise TransitionRefused(f"run {run_id} changed concurrently")
            self._event(tx, run_id, Q.QUEUED, now, {"from": Q.STARTING, "reason": reason})
            return _load(tx, run_id)

    def renew(self, run_id: str, token: str) -> Renewal:
        """Extend an unexpired claim; an expired or lost one raises ``ClaimLost``."""
        now = self._now()
        with self._db.transaction() as tx:
            row = self._owned(tx, run_id, token, now)
            lease = now + self.lease_ms
            if tx.execute("UPDATE workflow_run_queue SET lease_expires_at = ? WHERE run_id = ?"
                          " AND claim_token = ? AND lease_expires_at > ?",
                          (lease, run_id, token, now)) != 1:
                raise ClaimLost(f"the claim on run {run_id} is no longer held")
            return Renewal(lease, row.cancel_requested)

    def verify(self, run_id: str, token: str) -> QueueRow:
        """The fence: raise ``ClaimLost`` unless ``token`` is the current, unexpired claim."""
        now = self._now()
        with self._db.transaction() as tx:
            return self._owned(tx, run_id, token, now)

    def delete_unstarted_continuation(self, run_id: str, token: str) -> None:
        """Remove a continuation that failed before its bundle existed (frees the parent)."""
        now = self._now()
        with self._db.transaction() as tx:
            row = self._owned(tx, run_id, token, now)
            if row.parent_run_id is None or row.state != Q.STARTING:
                raise TransitionRefused(f"run {run_id} is not an unstarted continuation")
            if tx.execute("DELETE FROM workflow_run_queue WHERE run_id = ? AND state = ?"
                          " AND claim_token = ?", (run_id, Q.STARTING, token)) != 1:
                raise TransitionRefused(f"run {run_id} changed concurrently")
            self._event(tx, run_id, "deleted", now, {"parentRunId": row.parent_run_id})

    # ---- reading ---------------------------------------------------------

    def private_input(self, run_id: str, token: str) -> Any:
        """The run's private input, only for the current claim holder."""
        now = self._now()
        with self._db.transaction() as tx:
            self._owned(tx, run_id, token, now)
            text = tx.scalar("SELECT private_input FROM workflow_run_queue WHERE run_id = ?",
                             (run_id,))
        return None if text is None else json.loads(text)
