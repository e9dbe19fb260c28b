"""Claiming runs: taking a claim, renewing it, proving it, and what only its holder reads.

Owns every operation that hands a run to a runner (``claim_next``, the
host's pass; ``claim_by_id``, a named run) as one compare-and-set that
checks the transition or claim transfer, lease renewal, the fence's
``verify``, and reading the private input. A holder's claim is fenced
by its token alone; another runner takes it only on proof that the holder
is gone or after watching it make no progress for a lease of its own
monotonic time (``leasewatch``): no wall-clock step can take or void a
live claim. Does not import sqlite3.
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
    PAUSED_CODE,
    UNOWNED,
    QueueState,
    check_transfer,
    check_transition,
    sql_list,
)
from .backend import ConstraintViolation, Tx
from .base import StoreBase, load_row, new_token
from .records import Claim, Gone, QueueRow, Renewal

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
        """CAS one eligible row to a fresh claim owned by ``runner_id``.

        A claimed row is taken only as the caller judged it (``_may_take``):
        the CAS names its token, holder and lease, so a renewal in between
        (progress) or another taker makes it fail.
        """
        token = new_token()
        lease = now + self.lease_ms
        params: tuple[Any, ...]
        if row.state in UNOWNED:
            check_transition(row.run_id, row.state, Q.STARTING)
            new_state, kind = Q.STARTING, Q.STARTING.value
            # A pause survives the claim (chat's hold of a paused run, say): whoever
            # ends up running it parks it again at its first boundary.
            sets, where, params = (
                ", error_code = CASE WHEN error_code = ? THEN error_code END,"
                " error_message = CASE WHEN error_code = ? THEN error_message END",
                "", (PAUSED_CODE, PAUSED_CODE))
        else:
            check_transfer(row.run_id, row.state)
            new_state, kind = Q(row.state), "claim_taken_over"
            sets, where = "", " AND runner_id IS ? AND lease_expires_at IS ?"
            params = (row.runner_id, row.lease_expires_at)
        changed = tx.execute(
            "UPDATE workflow_run_queue SET state = ?, runner_id = ?, claim_token = ?,"
            " lease_expires_at = ?, updated_at = ?" + sets + " WHERE run_id = ? AND state = ?"
            " AND claim_token IS ?" + where,
            (new_state, runner_id, token, lease, now, *(params if row.state in UNOWNED else ()),
             row.run_id, row.state, row.claim_token,
             *(() if row.state in UNOWNED else params)),
        )
        if changed != 1:
            raise TransitionRefused(f"run {row.run_id} changed while it was being claimed")
        self._event(tx, row.run_id, kind, now, {"runnerId": runner_id, "from": row.state,
                                                "previousRunner": row.runner_id})
        return Claim(row.run_id, runner_id, token, lease, new_state, row.state)

    def claim_by_id(self, run_id: str, runner_id: str, *, session: str | None = None,
                    gone: Gone | None = None, paused_ok: bool = False) -> Claim:
        """Claim one named run: queued/parked, or a starting/running one whose holder
        is gone (``gone``, the caller's proof) or that this process watched make no
        progress for a lease (see ``_may_take``).

        A paused run is refused (``run_paused``: ``resume`` lifts the pause
        first) unless ``paused_ok``: a holder that runs nothing (chat).
        """
        validate_run_id(run_id)
        validate_key(runner_id, "runner id")
        now = self._now()
        try:
            with self._db.transaction() as tx:
                row = load_row(tx, run_id)
                if row.error_code == PAUSED_CODE and row.state in UNOWNED and not paused_ok:
                    raise TransitionRefused(f"run {run_id} is paused; `pi-workflows resume"
                                            f" {run_id}` continues it", code="run_paused")
                if row.origin_session is not None and session not in (None, row.origin_session) \
                        and row.state in (Q.QUEUED, Q.STARTING):
                    raise TransitionRefused(
                        f"run {run_id} belongs to session {row.origin_session}", code="not_owner")
                if row.state in CLAIMED and not self._may_take(tx, row, gone):
                    raise TransitionRefused(
                        f"run {run_id} is {row.state} and owned by runner {row.runner_id}",
                        code="claimed_elsewhere")
                return self._take(tx, row, runner_id, now)
        except ConstraintViolation:
            # parked -> starting re-enters the origin session's one active slot.
            raise ConflictError(
                f"run {run_id} cannot resume while its session has another active run;"
                " finish or cancel that run first", code="session_busy") from None

    def _stalled(self, tx: Tx, keep: Collection[str]) -> tuple[str, ...]:
        """Claimed runs this process watched go a lease without progress (``keep`` aside).

        Every claimed row is looked at on each call, so the watch sees each
        renewal of a run it might take, and forgets runs no longer claimed.
        """
        # Three columns through the state index: a pass stays cheap however
        # many runs are claimed (a claimed row always has a token and a lease).
        rows = tx.all("SELECT run_id, claim_token, lease_expires_at FROM workflow_run_queue"
                      " WHERE state IN " + _CLAIMED)
        self._watch.keep_only(r["run_id"] for r in rows)
        return tuple(r["run_id"] for r in rows
                     if self._watch.stale(r["run_id"], r["claim_token"], r["lease_expires_at"],
                                          self.lease_ms) and r["run_id"] not in keep)

    def watch_claims(self) -> None:
        """Look at every claimed row now, as ``claim_next`` does first.

        A runner that is not claiming (all its slots busy) calls this on each
        pass, so a claim that stalls meanwhile is seen as stalled in time.
        """
        with self._db.transaction(write=False) as tx:
            self._stalled(tx, ())

    def claim_next(self, runner_id: str, *, session: str | None = None,
                   keep: Collection[str] = ()) -> Claim | None:
        """Claim the next eligible run: runner affinity first, then the oldest.

        Without ``session`` the caller is a host: it never takes a session's
        unactivated ``queued`` row or an origin-bound ``starting`` row. With
        ``session`` only that session's rows and unowned rows are eligible.
        A claimed row is eligible only once this store watched it make no
        progress for a lease of its monotonic time (``_stalled``), never by
        its wall-clock lease. ``keep`` names runs the caller supervises
        itself (a host judges its own workers): never taken that way.
        """
        validate_key(runner_id, "runner id")
        now = self._now()
        if session is None:
            own = "origin_session IS NULL"
            params: tuple[Any, ...] = ()
            parked_own = "1 = 1"  # a boolean both engines take (PostgreSQL refuses a bare 1)
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
        with self._db.transaction() as tx:
            stalled = self._stalled(tx, keep)
            taken = f"run_id IN ({', '.join('?' * len(stalled))})" if stalled else "1 = 0"
            expired_params = (*stalled, *(params if session else ()))
            # A queued row carries an error code only when it is paused.
            own = f"{own} AND error_code IS NULL"
            eligible = (
                f"((state = '{Q.QUEUED}' AND {own}) OR (state = '{Q.PARKED}' AND {parked_own})"
                f" OR (state IN {_CLAIMED} AND {taken} AND {expired}))"
            )
            eligible_params = (*params, *parked_params, *expired_params)
            queries: Sequence[tuple[str, tuple[Any, ...]]] = (
                (f"SELECT * FROM workflow_run_queue WHERE runner_affinity = ? AND {eligible}"
                 " ORDER BY created_at, run_id LIMIT 1", (runner_id, *eligible_params)),
                (f"SELECT * FROM workflow_run_queue WHERE state = '{Q.QUEUED}' AND {own}"
                 " ORDER BY created_at, run_id LIMIT 1", params),
                (f"SELECT * FROM workflow_run_queue WHERE state = '{Q.PARKED}' AND {parked_own}"
                 " ORDER BY created_at, run_id LIMIT 1", parked_params),
                (f"SELECT * FROM workflow_run_queue WHERE state IN {_CLAIMED} AND {taken}"
                 f" AND {expired} ORDER BY created_at, run_id LIMIT 1", expired_params),
            )
            found = tx.one(*queries[0])
            if found is None:
                candidates = [r for q in queries[1:] if (r := tx.one(*q)) is not None]
                if not candidates:
                    return None
                found = min(candidates, key=lambda r: (r["created_at"], r["run_id"]))
            return self._take(tx, QueueRow.from_row(found), runner_id, now)

    def _next_lease(self, row: QueueRow, now: int) -> int:
        """A lease a lease ahead of now, and always past the last one.

        Past the last one, so every renewal is a change an observer sees as
        progress, whatever the wall clock did (after a backward step the
        lease stays ahead by up to the step until the clock catches up).
        """
        return max(now + self.lease_ms, (row.lease_expires_at or 0) + 1)

    def renew(self, run_id: str, token: str) -> Renewal:
        """Extend the claim ``token`` still holds; a lost one raises ``ClaimLost``.

        Fenced by the token alone: a wall-clock step either way never makes
        a live holder's renewal fail. The CAS names the lease it replaces.
        """
        now = self._now()
        with self._db.transaction() as tx:
            row = self._owned(tx, run_id, token)
            lease = self._next_lease(row, now)
            if tx.execute("UPDATE workflow_run_queue SET lease_expires_at = ? WHERE run_id = ?"
                          " AND claim_token = ? AND lease_expires_at IS ?",
                          (lease, run_id, token, row.lease_expires_at)) != 1:
                raise ClaimLost(f"the claim on run {run_id} is no longer held")
            return Renewal(lease, row.cancel_requested, row.error_code == PAUSED_CODE)

    def rotate(self, run_id: str, token: str) -> Claim:
        """The same claim under a new token: a worker the holder lost track of,
        holding the old one, is refused at its next fence and writes nothing."""
        now = self._now()
        with self._db.transaction() as tx:
            row = self._owned(tx, run_id, token)
            fresh = new_token()
            lease = self._next_lease(row, now)
            if tx.execute("UPDATE workflow_run_queue SET claim_token = ?, lease_expires_at = ?"
                          " WHERE run_id = ? AND claim_token = ? AND lease_expires_at IS ?",
                          (fresh, lease, run_id, token, row.lease_expires_at)) != 1:
                raise ClaimLost(f"the claim on run {run_id} is no longer held")
            state = QueueState(row.state)
            return Claim(run_id, str(row.runner_id), fresh, lease, state, state)

    def verify(self, run_id: str, token: str) -> QueueRow:
        """The fence: raise ``ClaimLost`` unless ``token`` is the current claim."""
        with self._db.transaction() as tx:
            return self._owned(tx, run_id, token)


    def private_input(self, run_id: str, token: str) -> Any:
        """The run's private input, only for the current claim holder."""
        with self._db.transaction() as tx:
            self._owned(tx, run_id, token)
            text = tx.scalar("SELECT private_input FROM workflow_run_queue WHERE run_id = ?",
                             (run_id,))
        return None if text is None else json.loads(text)

