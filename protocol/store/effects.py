"""Guarded external effects: ``pending -> applied | rejected | indeterminate``.

Owns the ``effects`` table. An effect is keyed by (run, node, effect key)
and carries a request fingerprint; the same key with another fingerprint is
a conflict, and an applied effect never changes again. Writes may be fenced
by the run's claim token in the same transaction. No sqlite3.
"""

from __future__ import annotations

import json
from typing import Any

from ..errors import ConflictError, LimitError, TransitionRefused
from ..limits import MAX_PAYLOAD_BYTES, validate_key, validate_run_id
from .base import StoreBase
from .records import Effect

EFFECT_STATES = ("pending", "applied", "rejected", "indeterminate")
# Where each state may go next; applied and rejected are final.
EFFECT_TRANSITIONS = {
    "pending": ("applied", "rejected", "indeterminate"),
    "indeterminate": ("pending",),
}

_KEY = "run_id = ? AND node_id = ? AND effect_key = ?"


class EffectOps(StoreBase):
    def begin_effect(self, run_id: str, node_id: str, effect_key: str, fingerprint: str,
                     attempt_id: str, *, token: str | None = None) -> tuple[Effect, bool]:
        """Record ``pending`` before the effect runs; returns (effect, created).

        If the effect already exists it is returned unchanged (the caller
        replays ``applied``/``rejected`` and decides what ``pending`` means).
        A different fingerprint for the same key raises ``ConflictError``.
        """
        validate_run_id(run_id)
        validate_key(node_id, "node id")
        validate_key(effect_key, "effect key")
        validate_key(fingerprint, "fingerprint")
        now = self._now()
        with self._db.transaction() as tx:
            self._fence(tx, run_id, token)
            row = tx.one(f"SELECT * FROM effects WHERE {_KEY}", (run_id, node_id, effect_key))
            if row is not None:
                effect = Effect.from_row(row)
                if effect.fingerprint != fingerprint:
                    raise ConflictError(
                        f"effect {effect_key} of node {node_id} was recorded with another request",
                        code="effect_conflict")
                return effect, False
            tx.execute("INSERT INTO effects(run_id, node_id, effect_key, fingerprint, state,"
                       " attempt_id, created_at, updated_at) VALUES (?,?,?,?,'pending',?,?,?)",
                       (run_id, node_id, effect_key, fingerprint, attempt_id, now, now))
            created = tx.one(f"SELECT * FROM effects WHERE {_KEY}", (run_id, node_id, effect_key))
        assert created is not None
        return Effect.from_row(created), True

    def _settle(self, run_id: str, node_id: str, effect_key: str, to_state: str,
                result: Any, attempt_id: str | None, token: str | None) -> Effect:
        body = None if result is None else json.dumps(result, sort_keys=True)
        if body is not None and len(body.encode()) > MAX_PAYLOAD_BYTES:
            raise LimitError(f"effect result is larger than {MAX_PAYLOAD_BYTES} bytes")
        now = self._now()
        with self._db.transaction() as tx:
            self._fence(tx, run_id, token)
            row = tx.one(f"SELECT * FROM effects WHERE {_KEY}", (run_id, node_id, effect_key))
            if row is None:
                raise TransitionRefused(f"effect {effect_key} of node {node_id} was never begun")
            if to_state not in EFFECT_TRANSITIONS.get(row["state"], ()):
                raise TransitionRefused(
                    f"effect {effect_key} of node {node_id} is {row['state']};"
                    f" it cannot become {to_state}")
            changed = tx.execute(
                "UPDATE effects SET state = ?, result = coalesce(?, result),"
                " attempt_id = coalesce(?, attempt_id), updated_at = ?"
                f" WHERE {_KEY} AND state = ?",
                (to_state, body, attempt_id, now, run_id, node_id, effect_key, row["state"]))
            if changed != 1:
                raise TransitionRefused(f"effect {effect_key} changed concurrently")
            out = tx.one(f"SELECT * FROM effects WHERE {_KEY}", (run_id, node_id, effect_key))
        assert out is not None
        return Effect.from_row(out)

    def apply_effect(self, run_id: str, node_id: str, effect_key: str, result: Any, *,
                     token: str | None = None) -> Effect:
        return self._settle(run_id, node_id, effect_key, "applied", result, None, token)

    def reject_effect(self, run_id: str, node_id: str, effect_key: str, result: Any, *,
                      token: str | None = None) -> Effect:
        return self._settle(run_id, node_id, effect_key, "rejected", result, None, token)

    def mark_effect_indeterminate(self, run_id: str, node_id: str, effect_key: str, *,
                                  token: str | None = None) -> Effect:
        return self._settle(run_id, node_id, effect_key, "indeterminate", None, None, token)

    def retry_effect(self, run_id: str, node_id: str, effect_key: str, attempt_id: str, *,
                     token: str | None = None) -> Effect:
        """``indeterminate -> pending`` for an idempotent effect that will run again."""
        return self._settle(run_id, node_id, effect_key, "pending", None, attempt_id, token)

    def get_effect(self, run_id: str, node_id: str, effect_key: str) -> Effect | None:
        with self._db.transaction(write=False) as tx:
            row = tx.one(f"SELECT * FROM effects WHERE {_KEY}", (run_id, node_id, effect_key))
        return None if row is None else Effect.from_row(row)

    def list_effects(self, run_id: str) -> list[Effect]:
        with self._db.transaction(write=False) as tx:
            rows = tx.all("SELECT * FROM effects WHERE run_id = ? ORDER BY created_at, node_id,"
                          " effect_key", (run_id,))
        return [Effect.from_row(r) for r in rows]
