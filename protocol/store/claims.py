"""Claiming runs: taking a claim, renewing it, proving it, and what only its holder reads.

Owns every operation that hands a run to a runner (``claim_next``, the
host's pass; ``claim_by_id``, a named run) as one compare-and-set that
checks the transition or claim transfer, lease renewal, the fence's
``verify``, and reading the private input. Does not import sqlite3.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from typing import Any

from ..errors import ClaimLost, ConflictError, TransitionRefused
from ..limits import validate_key, validate_run_id
from ..states import (
    ACTIVE,
    CLAIMED,
    UNOWNED,
    QueueState,
    check_transfer,
    check_transition,
    sql_list,
)
from .base import StoreBase, load_row, new_token
from .db import ConstraintViolation, Tx
from .records import Claim, QueueRow, Renewal

Q = QueueState
_CLAIMED = sql_list(CLAIMED)
# A parked run re-enters its origin session's one active slot when claimed.
_SESSION_FREE = (
    "(origin_session IS NULL OR NOT EXISTS (SELECT 1 FROM workflow_run_queue AS busy"
    " WHERE busy.origin_session = workflow_run_queue.origin_session"
    f" AND busy.state IN {sql_list(ACTIVE)}))"
)


class ClaimOps(StoreBase):
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
                row = load_row(tx, run_id)
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

    def claim_next(self, runner_id: str, *, session: str | None = None,
                   keep: Collection[str] = ()) -> Claim | None:
        """Claim the next eligible run: runner affinity first, then the oldest.

        Without ``session`` the caller is a host: it never takes a session's
        unactivated ``queued`` row or an origin-bound ``starting`` row. With
        ``session`` only that session's rows and unowned rows are eligible.
        ``keep`` names runs the caller supervises itself: never taken because
        their lease looks expired (a forward wall-clock step makes every lease
        look so), since the caller judges their workers by its monotonic clock.
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
        kept = tuple(keep)
        if kept:
            expired = f"({expired} AND run_id NOT IN ({', '.join('?' * len(kept))}))"
        # Resuming a parked run re-enters its origin session's one active slot
        # (the reservation index): skip it while that session has another run.
        # A parked run carrying an error code waits for a person (for example
        # its workflow file changed: `resume --force`); no runner takes it.
        parked_own = f"{parked_own} AND {_SESSION_FREE} AND error_code IS NULL"
        eligible = (
            f"((state = '{Q.QUEUED}' AND {own}) OR (state = '{Q.PARKED}' AND {parked_own})"
            f" OR (state IN {_CLAIMED} AND lease_expires_at <= ? AND {expired}))"
        )
        eligible_params = (*params, *parked_params, now, *(params if session else ()), *kept)
        queries: Sequence[tuple[str, tuple[Any, ...]]] = (
            (f"SELECT * FROM workflow_run_queue WHERE runner_affinity = ? AND {eligible}"
             " ORDER BY created_at, run_id LIMIT 1", (runner_id, *eligible_params)),
            (f"SELECT * FROM workflow_run_queue WHERE state = '{Q.QUEUED}' AND {own}"
             " ORDER BY created_at, run_id LIMIT 1", params),
            (f"SELECT * FROM workflow_run_queue WHERE state = '{Q.PARKED}' AND {parked_own}"
             " ORDER BY created_at, run_id LIMIT 1", parked_params),
            ("SELECT * FROM workflow_run_queue WHERE lease_expires_at <= ? AND state IN"
             f" {_CLAIMED} AND {expired} ORDER BY created_at, run_id LIMIT 1",
             (now, *(params if session else ()), *kept)),
        )
        with self._db.transaction() as tx:
            found = tx.one(*queries[0])
            if found is None:
                candidates = [r for q in queries[1:] if (r := tx.one(*q)) is not None]
                if not candidates:
                    return None
                found = min(candidates, key=lambda r: (r["created_at"], r["run_id"]))
            return self._take(tx, QueueRow.from_row(found), runner_id, now)


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

    def rotate(self, run_id: str, token: str) -> Claim:
        """The same claim under a new token: a worker the holder lost track of,
        holding the old one, is refused at its next fence and writes nothing."""
        now = self._now()
        with self._db.transaction() as tx:
            row = self._owned(tx, run_id, token, now)
            fresh = new_token()
            lease = now + self.lease_ms
            if tx.execute("UPDATE workflow_run_queue SET claim_token = ?, lease_expires_at = ?"
                          " WHERE run_id = ? AND claim_token = ? AND lease_expires_at > ?",
                          (fresh, lease, run_id, token, now)) != 1:
                raise ClaimLost(f"the claim on run {run_id} is no longer held")
            state = QueueState(row.state)
            return Claim(run_id, str(row.runner_id), fresh, lease, state, state)

    def verify(self, run_id: str, token: str) -> QueueRow:
        """The fence: raise ``ClaimLost`` unless ``token`` is the current, unexpired claim."""
        now = self._now()
        with self._db.transaction() as tx:
            return self._owned(tx, run_id, token, now)


    def private_input(self, run_id: str, token: str) -> Any:
        """The run's private input, only for the current claim holder."""
        now = self._now()
        with self._db.transaction() as tx:
            self._owned(tx, run_id, token, now)
            text = tx.scalar("SELECT private_input FROM workflow_run_queue WHERE run_id = ?",
                             (run_id,))
        return None if text is None else json.loads(text)

