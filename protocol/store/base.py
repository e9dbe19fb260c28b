"""Shared plumbing for the store's operation mixins.

Owns the state every mixin shares, the claim check inside a caller's
transaction, and the one helper that records a lifecycle event in
``run_events``. The transition table is ``protocol.states``'. Does not
import sqlite3 (``db.py`` does).
"""

from __future__ import annotations

import secrets
from typing import Any

from ..clock import Clock
from ..errors import ClaimLost
from ..limits import encode_payload
from .db import Database, Tx


def new_token() -> str:
    return secrets.token_hex(16)


class StoreBase:
    """State every mixin needs: the database, the clock and the lease length."""

    _db: Database
    _clock: Clock
    lease_ms: int

    def _now(self) -> int:
        return self._clock()

    @staticmethod
    def _fence(tx: Tx, run_id: str, token: str | None, now: int) -> None:
        """Inside the caller's transaction: a write on behalf of a run needs its live claim."""
        if token is None:
            return
        row = tx.one("SELECT claim_token, lease_expires_at FROM workflow_run_queue"
                     " WHERE run_id = ?", (run_id,))
        if row is None or row["claim_token"] != token or (row["lease_expires_at"] or 0) <= now:
            raise ClaimLost(f"the claim on run {run_id} is no longer held")

    @staticmethod
    def _event(tx: Tx, run_id: str, type_: str, at: int, payload: dict[str, Any]) -> int:
        """Append one row to the run-level feed; payloads never hold private input."""
        return tx.insert(
            "INSERT INTO run_events(run_id, type, at, payload) VALUES (?, ?, ?, ?)",
            (run_id, type_, at, encode_payload(payload, "run event payload")),
        )
