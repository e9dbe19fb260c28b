"""Shared plumbing for the store's operation mixins.

Owns the state every mixin shares, the claim check inside a caller's
transaction, and the one helper that records a lifecycle event in
``run_events``. The transition table is ``protocol.states``'. Does not
import a database module (``db.py`` and ``pg.py`` do).
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

from ..clock import Clock
from ..errors import ClaimLost, NotFound
from ..limits import encode_payload
from .backend import Backend, Tx
from .leasewatch import LeaseWatch
from .records import Gone, QueueRow

LAUNCH_FAILED = "launch_failed"  # the source event of a launch's follow-up turn intent


def intent_id_for(session_id: str, run_id: str, source_event: str, cause: str) -> str:
    """Deterministic: the same (session, run, event, cause) always names one intent."""
    raw = "\x1f".join((session_id, run_id, source_event, cause)).encode()
    return "ti-" + hashlib.sha256(raw).hexdigest()[:32]


def load_row(tx: Tx, run_id: str) -> QueueRow:
    row = tx.one("SELECT * FROM workflow_run_queue WHERE run_id = ?", (run_id,))
    if row is None:
        raise NotFound(f"no run {run_id} in the queue", code="run_not_found")
    return QueueRow.from_row(row)


def new_token() -> str:
    return os.urandom(16).hex()  # what secrets.token_hex does, without importing it


def _still_gone(tx: Tx, gone: Gone) -> bool:
    """The proof still holds: no runner row under that id, or the same dead one."""
    current = tx.one("SELECT pid, pid_start_time FROM runners WHERE runner_id = ?",
                     (gone.runner_id,))
    if current is None:
        return True
    return gone.pid is not None and (current["pid"], current["pid_start_time"]) == (
        gone.pid, gone.pid_start_time)


class StoreBase:
    """State every mixin needs: the database, the clocks and the lease length.

    ``_clock`` (wall, epoch ms) stamps rows and lease values; ``_watch`` judges
    other runners' claims on this process's monotonic clock (``leasewatch``).
    """

    _db: Backend
    _clock: Clock
    _watch: LeaseWatch
    lease_ms: int

    def _now(self) -> int:
        return self._clock()

    @staticmethod
    def _fence(tx: Tx, run_id: str, token: str | None) -> None:
        """Inside the caller's transaction: a write on behalf of a run needs its claim.

        By token alone, never by the wall clock: a claim stays the holder's
        until someone takes it over (a new token), so a clock step cannot
        void a live claim. Who may take one over: ``claims.py``.
        """
        if token is None:
            return
        row = tx.one("SELECT claim_token FROM workflow_run_queue WHERE run_id = ?", (run_id,))
        if row is None or row["claim_token"] != token:
            raise ClaimLost(f"the claim on run {run_id} is no longer held")

    @staticmethod
    def _owned(tx: Tx, run_id: str, token: str) -> QueueRow:
        """Inside the caller's transaction: the row, if ``token`` is its current claim."""
        row = load_row(tx, run_id)
        if row.claim_token is None or row.claim_token != token:
            raise ClaimLost(f"the claim on run {run_id} is no longer held (state {row.state})")
        return row

    def _may_take(self, tx: Tx, row: QueueRow, gone: Gone | None = None) -> bool:
        """Inside the caller's transaction: may this claimed row be taken from its holder?

        Only if its holder is proven gone (``gone``, still true now), or this
        process watched the claim make no progress for a whole lease of its
        own monotonic time. Never because its wall-clock lease looks past: a
        forward step makes every live lease look so.
        """
        if row.claim_token is None or row.lease_expires_at is None:
            return True  # nothing claimed to take
        if gone is not None and gone.runner_id == row.runner_id and _still_gone(tx, gone):
            return True
        return self._watch.stale(row.run_id, row.claim_token, row.lease_expires_at,
                                 self.lease_ms)

    @staticmethod
    def _add_turn_intent(tx: Tx, session_id: str, run_id: str, source_event: str, cause: str,
                         payload: dict[str, Any], now: int) -> tuple[str, bool]:
        """Inside the caller's transaction: the deterministic intent, created if new."""
        intent_id = intent_id_for(session_id, run_id, source_event, cause)
        if tx.one("SELECT 1 FROM workflow_turn_intents WHERE intent_id = ?", (intent_id,)):
            return intent_id, False
        tx.execute(
            "INSERT INTO workflow_turn_intents(intent_id, session_id, run_id, source_event,"
            " cause, payload, state, created_at) VALUES (?,?,?,?,?,?,'pending',?)",
            (intent_id, session_id, run_id, source_event, cause,
             encode_payload(payload, "turn intent payload"), now))
        return intent_id, True

    def _after_run_ended(self, tx: Tx, run_id: str, state: str, now: int) -> None:
        """Inside the transaction that ended a run: what else must commit with it.

        Nothing here; the controllers' mixin queues the parent resource of a
        child run (``controllers.children``).
        """

    @staticmethod
    def _event(tx: Tx, run_id: str, type_: str, at: int, payload: dict[str, Any]) -> int:
        """Append one row to the run-level feed; payloads never hold private input."""
        return tx.insert(
            "INSERT INTO run_events(run_id, type, at, payload) VALUES (?, ?, ?, ?)",
            (run_id, type_, at, encode_payload(payload, "run event payload")),
        )
