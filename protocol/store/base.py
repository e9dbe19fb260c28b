"""Shared plumbing for the store's operation mixins.

Owns the transition table of the run queue and the one helper that records a
lifecycle event in ``run_events`` inside the caller's transaction. Does not
import sqlite3 (``db.py`` does).
"""

from __future__ import annotations

import secrets
from typing import Any

from ..clock import Clock
from ..limits import encode_payload
from .db import Database, Tx

# Seed 002's "State transitions", exactly. Claim transfers (a new token on a
# starting/running row after lease expiry or a dead owner) keep the state and
# are not transitions.
TRANSITIONS: frozenset[tuple[str, str]] = frozenset(
    {
        ("queued", "starting"),
        ("queued", "cancelled"),
        ("starting", "running"),
        ("starting", "failed"),
        ("starting", "cancelled"),
        ("starting", "queued"),
        ("running", "parked"),
        ("running", "done"),
        ("running", "failed"),
        ("running", "cancelled"),
        ("parked", "starting"),
        ("parked", "cancelled"),
    }
)


def allowed(from_state: str, to_state: str) -> bool:
    return (from_state, to_state) in TRANSITIONS


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
    def _event(tx: Tx, run_id: str, type_: str, at: int, payload: dict[str, Any]) -> int:
        """Append one row to the run-level feed; payloads never hold private input."""
        return tx.insert(
            "INSERT INTO run_events(run_id, type, at, payload) VALUES (?, ?, ?, ?)",
            (run_id, type_, at, encode_payload(payload, "run event payload")),
        )
