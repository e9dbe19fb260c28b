"""Guarded effects of reconciles: ``pending -> applied | rejected | indeterminate``.

Owns ``controller_effects``: one record per (controller, key, effect key)
with its kind, request fingerprint and the resource generation it was
reserved at. ``reserve_reconcile_effect`` writes ``pending`` before the effect is
applied; the same key with another fingerprint, generation or kind is
refused with its own code; ``applied``/``rejected`` never change again.
Every write is fenced by the reconcile's claim token in its transaction.
The observe/apply protocol around these is the runtime's. No sqlite3.
"""

from __future__ import annotations

from typing import Any

from ...errors import ConflictError, TransitionRefused
from ..backend import Tx
from .bounds import encode_document, validate_controller_name, validate_resource_key
from .core import CtlBase
from .records import ReconcileEffect

EFFECT_TRANSITIONS = {"pending": ("applied", "rejected", "indeterminate")}
_KEY = "controller = ? AND key = ? AND effect_key = ?"


def _load(tx: Tx, controller: str, key: str, effect_key: str) -> ReconcileEffect | None:
    row = tx.one(f"SELECT * FROM controller_effects WHERE {_KEY}", (controller, key, effect_key))
    return None if row is None else ReconcileEffect.from_row(row)


def _check(controller: str, key: str, effect_key: str) -> None:
    validate_controller_name(controller)
    validate_resource_key(key)
    validate_resource_key(effect_key, "effect key")


class CtlEffectOps(CtlBase):
    def reserve_reconcile_effect(self, controller: str, key: str, effect_key: str, *, kind: str,
                       fingerprint: str, generation: int, token: str
                       ) -> tuple[ReconcileEffect, bool]:
        """Record ``pending`` before the effect is applied; returns (effect, created).

        An existing record with the same kind, fingerprint and generation is
        returned as it is (the caller replays applied/rejected, observes a
        pending one and reports an indeterminate one). Another fingerprint
        raises ``ConflictError`` ``effect_request_changed``, another
        generation ``effect_generation_changed``, another kind
        ``effect_kind_changed``. Fenced by the reconcile claim ``token``.
        """
        _check(controller, key, effect_key)
        validate_resource_key(kind, "effect kind")
        validate_resource_key(fingerprint, "fingerprint")
        now = self._now()
        with self._db.transaction() as tx:
            self._ctl_fence(tx, controller, key, token)
            found = _load(tx, controller, key, effect_key)
            if found is not None:
                where = f"effect {effect_key} of {controller}/{key}"
                if found.kind != kind:
                    raise ConflictError(f"{where} was recorded as a {found.kind} effect, not"
                                        f" {kind}; use another effect key",
                                        code="effect_kind_changed")
                if found.fingerprint != fingerprint:
                    raise ConflictError(f"{where} was recorded with another request; an"
                                        " effect key names one request: use another key",
                                        code="effect_request_changed")
                if found.generation != generation:
                    raise ConflictError(f"{where} was recorded at generation"
                                        f" {found.generation}, not {generation}; include the"
                                        " generation in the key", code="effect_generation_changed")
                return found, False
            tx.execute("INSERT INTO controller_effects(controller, key, effect_key, kind,"
                       " fingerprint, generation, state, created_at, updated_at)"
                       " VALUES (?,?,?,?,?,?,'pending',?,?)",
                       (controller, key, effect_key, kind, fingerprint, int(generation), now, now))
            uid = tx.scalar("SELECT uid FROM controller_resources WHERE controller = ? AND"
                            " key = ?", (controller, key))
            self._ctl_event(tx, controller, key, uid, "effect_reserved", now, None,
                            {"effectKey": effect_key, "kind": kind, "generation": generation})
            created = _load(tx, controller, key, effect_key)
        assert created is not None
        return created, True

    def _mark(self, controller: str, key: str, effect_key: str, to_state: str, result: Any,
              token: str) -> ReconcileEffect:
        _check(controller, key, effect_key)
        body = None if result is None else encode_document(result, "effect result")
        now = self._now()
        with self._db.transaction() as tx:
            self._ctl_fence(tx, controller, key, token)
            found = _load(tx, controller, key, effect_key)
            if found is None:
                raise TransitionRefused(f"effect {effect_key} of {controller}/{key} was never"
                                        " reserved", code="effect_not_reserved")
            if to_state not in EFFECT_TRANSITIONS.get(found.state, ()):
                raise TransitionRefused(f"effect {effect_key} of {controller}/{key} is"
                                        f" {found.state}; it cannot become {to_state}",
                                        code="effect_settled")
            if tx.execute(f"UPDATE controller_effects SET state = ?, result = coalesce(?, result),"
                          f" updated_at = ? WHERE {_KEY} AND state = ?",
                          (to_state, body, now, controller, key, effect_key, found.state)) != 1:
                raise TransitionRefused(f"effect {effect_key} changed concurrently")
            uid = tx.scalar("SELECT uid FROM controller_resources WHERE controller = ? AND"
                            " key = ?", (controller, key))
            self._ctl_event(tx, controller, key, uid, f"effect_{to_state}", now, None,
                            {"effectKey": effect_key, "kind": found.kind})
            out = _load(tx, controller, key, effect_key)
        assert out is not None
        return out

    def mark_reconcile_effect_applied(self, controller: str, key: str, effect_key: str,
                                      result: Any, *, token: str) -> ReconcileEffect:
        """``pending -> applied`` with its result (final)."""
        return self._mark(controller, key, effect_key, "applied", result, token)

    def mark_reconcile_effect_rejected(self, controller: str, key: str, effect_key: str,
                                       result: Any, *, token: str) -> ReconcileEffect:
        """``pending -> rejected`` with its result (final)."""
        return self._mark(controller, key, effect_key, "rejected", result, token)

    def mark_reconcile_effect_indeterminate(self, controller: str, key: str, effect_key: str,
                                            result: Any = None, *, token: str
                                            ) -> ReconcileEffect:
        """``pending -> indeterminate``: apply raised, or observe could not tell."""
        return self._mark(controller, key, effect_key, "indeterminate", result, token)

    def get_reconcile_effect(self, controller: str, key: str, effect_key: str
                             ) -> ReconcileEffect | None:
        _check(controller, key, effect_key)
        with self._db.transaction(write=False) as tx:
            return _load(tx, controller, key, effect_key)

    def reconcile_effects(self, controller: str, key: str) -> list[ReconcileEffect]:
        """The resource's effect records, oldest first (for ``get``)."""
        validate_controller_name(controller)
        validate_resource_key(key)
        with self._db.transaction(write=False) as tx:
            rows = tx.all("SELECT * FROM controller_effects WHERE controller = ? AND key = ?"
                          " ORDER BY created_at, effect_key", (controller, key))
        return [ReconcileEffect.from_row(r) for r in rows]
