"""The run-level event feed, session watermarks, notifications and turn intents.

Owns ``run_events``, ``session_watermarks``, ``workflow_notifications`` and
``workflow_turn_intents``: everything a session reads to catch up, each
delivered or resolved exactly once. No sqlite3.
"""

from __future__ import annotations

from typing import Any

from ..errors import ConflictError, TransitionRefused, UsageError
from ..limits import encode_payload, validate_key, validate_run_id
from .backend import ConstraintViolation
from .base import StoreBase, intent_id_for, new_token
from .records import Notification, RunEvent, TurnIntent
from .turns import CLAIM_LOST, owe_turn, supersede

NOTIFICATION_KINDS = ("progress", "final")


class FeedOps(StoreBase):
    # ---- run events ---------------------------------------------------------

    def append_run_event(self, run_id: str, type_: str, payload: dict[str, Any]) -> int:
        validate_run_id(run_id)
        validate_key(type_, "event type")
        with self._db.transaction() as tx:
            return self._event(tx, run_id, type_, self._now(), payload)

    def events_since(self, seq: int, *, run_id: str | None = None,
                     limit: int = 1000) -> list[RunEvent]:
        with self._db.transaction(write=False) as tx:
            if run_id is None:
                rows = tx.all("SELECT * FROM run_events WHERE seq > ? ORDER BY seq LIMIT ?",
                              (seq, limit))
            else:
                rows = tx.all("SELECT * FROM run_events WHERE run_id = ? AND seq > ?"
                              " ORDER BY seq LIMIT ?", (run_id, seq, limit))
        return [RunEvent.from_row(r) for r in rows]

    def last_event_seq(self) -> int:
        with self._db.transaction(write=False) as tx:
            return int(tx.scalar("SELECT coalesce(max(seq), 0) FROM run_events"))

    # ---- watermarks -----------------------------------------------------

    def watermark(self, session_id: str) -> int:
        with self._db.transaction(write=False) as tx:
            value = tx.scalar("SELECT seq FROM session_watermarks WHERE session_id = ?",
                              (session_id,))
        return int(value or 0)

    def advance_watermark(self, session_id: str, seq: int) -> int:
        """Move the session's watermark forward to ``seq``; never backwards. Returns it."""
        validate_key(session_id, "session id")
        if seq < 0:
            raise UsageError("a watermark cannot be negative")
        now = self._now()
        with self._db.transaction() as tx:
            tx.execute(
                "INSERT INTO session_watermarks(session_id, seq, updated_at) VALUES (?, ?, ?)"
                " ON CONFLICT(session_id) DO UPDATE SET seq = excluded.seq,"
                " updated_at = excluded.updated_at WHERE excluded.seq > session_watermarks.seq",
                (session_id, seq, now))
            return int(tx.scalar("SELECT seq FROM session_watermarks WHERE session_id = ?",
                                 (session_id,)))

    # ---- notifications --------------------------------------------------

    def add_notification(self, session_id: str, run_id: str, node_id: str, idx: int,
                         kind: str, payload: dict[str, Any], *,
                         token: str | None = None) -> bool:
        """Record a passive message; idempotent per (run, node, idx). True if new.

        With ``token`` the run's claim is checked in the same transaction, so a
        runner that lost its claim cannot add anything.
        """
        validate_key(session_id, "session id")
        validate_run_id(run_id)
        validate_key(node_id, "node id")
        if kind not in NOTIFICATION_KINDS:
            raise UsageError(f"notification kind must be one of {NOTIFICATION_KINDS}")
        body = encode_payload(payload, "notification payload")
        with self._db.transaction() as tx:
            self._fence(tx, run_id, token)
            return tx.execute(
                "INSERT INTO workflow_notifications(session_id, run_id, node_id, idx, kind,"
                " payload, created_at) VALUES (?,?,?,?,?,?,?)"
                " ON CONFLICT(run_id, node_id, idx) DO NOTHING",
                (session_id, run_id, node_id, idx, kind, body, self._now())) == 1

    def claim_notifications(self, session_id: str, *, limit: int = 50,
                            lease_ms: int | None = None) -> tuple[str, list[Notification]]:
        """Lease undelivered notifications for delivery; returns (token, rows)."""
        now = self._now()
        token = new_token()
        expires = now + (lease_ms or self.lease_ms)
        with self._db.transaction() as tx:
            ids = [r["id"] for r in tx.all(
                "SELECT id FROM workflow_notifications WHERE session_id = ?"
                " AND delivered_at IS NULL AND (delivery_token IS NULL OR delivery_expires_at <= ?)"
                " ORDER BY id LIMIT ?", (session_id, now, limit))]
            rows = []
            for nid in ids:
                tx.execute("UPDATE workflow_notifications SET delivery_token = ?,"
                           " delivery_expires_at = ? WHERE id = ? AND delivered_at IS NULL",
                           (token, expires, nid))
                row = tx.one("SELECT * FROM workflow_notifications WHERE id = ?", (nid,))
                assert row is not None
                rows.append(Notification.from_row(row))
        return token, rows

    def mark_notification_delivered(self, notification_id: int, token: str) -> bool:
        """True exactly once: for the delivery claim an undelivered row still carries.

        A claim past its lease still marks the row while no other deliverer
        has claimed it since (that would have replaced the token): the row
        was shown once, by this claim, and must not be shown again because
        the mark came late (a store held busy, a deliverer descheduled).
        """
        now = self._now()
        with self._db.transaction() as tx:
            return tx.execute(
                "UPDATE workflow_notifications SET delivered_at = ?, delivery_token = NULL,"
                " delivery_expires_at = NULL WHERE id = ? AND delivered_at IS NULL"
                " AND delivery_token = ?",
                (now, notification_id, token)) == 1

    def release_notifications(self, token: str) -> int:
        with self._db.transaction() as tx:
            return tx.execute("UPDATE workflow_notifications SET delivery_token = NULL,"
                              " delivery_expires_at = NULL WHERE delivery_token = ?"
                              " AND delivered_at IS NULL", (token,))

    # ---- turn intents ---------------------------------------------------

    def create_turn_intent(self, session_id: str, run_id: str, source_event: str, cause: str,
                           payload: dict[str, Any]) -> tuple[TurnIntent, bool]:
        """Create (or find) the deterministic intent; at most one pending per (run, session)."""
        validate_key(session_id, "session id")
        validate_run_id(run_id)
        validate_key(source_event, "source event")
        validate_key(cause, "cause")
        # The unique index raises when the statement runs, but the store error
        # (ConstraintViolation) is only raised once the transaction unwinds.
        try:
            with self._db.transaction() as tx:
                intent_id, created = self._add_turn_intent(tx, session_id, run_id, source_event,
                                                           cause, payload, self._now())
                row = tx.one("SELECT * FROM workflow_turn_intents WHERE intent_id = ?",
                             (intent_id,))
        except ConstraintViolation:
            raise ConflictError(
                f"run {run_id} already has a pending turn intent for session {session_id}",
                code="intent_pending") from None
        assert row is not None
        return TurnIntent.from_row(row), created

    def owe_claim_lost_turn(self, session_id: str, run_id: str, node_id: str,
                            attempt_id: str, *, workflow: str | None = None
                            ) -> tuple[TurnIntent | None, bool]:
        """A claim the session lost while a step of its conversation was pending.

        The contract, for the session runner that notices it (issue 22, item
        6): call it once the session ``session_id`` no longer holds the claim
        on ``run_id`` (taken over, expired, fenced out) while the agent step
        ``node_id`` / ``attempt_id`` had been delivered into its conversation
        and its result not accepted. It records one follow-up turn for that
        session, through the same two-step leased delivery as every other
        (``sync --hold-follow-ups``, then ``resolve-follow-up``): the model is
        told the step is no longer its to answer, so it does not go on with it.

        Exactly once per (session, run, node, attempt): calling it again (a
        retry, a second runner, a restart) creates nothing and returns the
        first intent. When the run already owes the session a turn (one
        pending intent per run and session: its failure, a cancel), that one
        stands and this returns ``(that intent, False)``. It takes no claim
        and needs none; it never changes the run. Returns (the pending or
        earlier intent, whether this call created it).
        """
        validate_key(session_id, "session id")
        validate_run_id(run_id)
        validate_key(node_id, "node id")
        validate_key(attempt_id, "attempt id")
        payload = {"runId": run_id, "nodeId": node_id, "attemptId": attempt_id,
                   **({"workflow": workflow} if workflow else {})}
        with self._db.transaction() as tx:
            created = owe_turn(tx, session_id, run_id, CLAIM_LOST, f"{node_id}/{attempt_id}",
                               payload, self._now())
            row = tx.one("SELECT * FROM workflow_turn_intents WHERE session_id = ? AND"
                         " run_id = ? AND (state = 'pending' OR intent_id = ?)"
                         " ORDER BY state = 'pending' DESC LIMIT 1",
                         (session_id, run_id, intent_id_for(
                             session_id, run_id, CLAIM_LOST, f"{node_id}/{attempt_id}")))
        return (None if row is None else TurnIntent.from_row(row)), created

    def supersede_turns(self, session_id: str, run_id: str) -> int:
        """A natural turn about ``run_id`` (its next step message) reaches the session:
        its moot pending intents (a claim lost earlier) are resolved, not sent as well."""
        with self._db.transaction() as tx:
            return supersede(tx, session_id, run_id, self._now())

    def claim_turn_intents(self, session_id: str, *, limit: int = 10,
                           lease_ms: int | None = None) -> tuple[str, list[TurnIntent]]:
        now = self._now()
        token = new_token()
        expires = now + (lease_ms or self.lease_ms)
        with self._db.transaction() as tx:
            ids = [r["intent_id"] for r in tx.all(
                "SELECT intent_id FROM workflow_turn_intents WHERE session_id = ?"
                " AND state = 'pending' AND (claim_token IS NULL OR claim_expires_at <= ?)"
                " ORDER BY created_at, intent_id LIMIT ?", (session_id, now, limit))]
            out = []
            for iid in ids:
                tx.execute("UPDATE workflow_turn_intents SET claim_token = ?, claim_expires_at = ?"
                           " WHERE intent_id = ? AND state = 'pending'", (token, expires, iid))
                row = tx.one("SELECT * FROM workflow_turn_intents WHERE intent_id = ?", (iid,))
                assert row is not None
                out.append(TurnIntent.from_row(row))
        return token, out

    def resolve_turn_intent(self, intent_id: str, token: str) -> None:
        """``pending -> resolved`` exactly once, only for the live claim."""
        now = self._now()
        with self._db.transaction() as tx:
            if tx.execute(
                "UPDATE workflow_turn_intents SET state = 'resolved', resolved_at = ?,"
                " claim_token = NULL, claim_expires_at = NULL WHERE intent_id = ?"
                " AND state = 'pending' AND claim_token = ? AND claim_expires_at > ?",
                (now, intent_id, token, now)) != 1:
                raise TransitionRefused(f"turn intent {intent_id} is not claimed by this caller")

    def release_turn_intent(self, intent_id: str, token: str) -> bool:
        with self._db.transaction() as tx:
            return tx.execute("UPDATE workflow_turn_intents SET claim_token = NULL,"
                              " claim_expires_at = NULL WHERE intent_id = ? AND state = 'pending'"
                              " AND claim_token = ?", (intent_id, token)) == 1

    def list_turn_intents(self) -> list[TurnIntent]:
        """Every turn intent, oldest first (for drills and diagnostics)."""
        with self._db.transaction(write=False) as tx:
            rows = tx.all("SELECT * FROM workflow_turn_intents ORDER BY created_at, intent_id")
        return [TurnIntent.from_row(r) for r in rows]

    def get_turn_intent(self, intent_id: str) -> TurnIntent | None:
        with self._db.transaction(write=False) as tx:
            row = tx.one("SELECT * FROM workflow_turn_intents WHERE intent_id = ?", (intent_id,))
        return None if row is None else TurnIntent.from_row(row)
