"""The controller event table: its reads (``get``'s last 50, ``events --follow``)
and the one public append (a reconcile's own lines, ``ctx.log``).

The store's own events are written inside other writes (``core._ctl_event``);
``append_controller_event`` adds one on behalf of a reconcile, fenced by its
claim token, redacted and bounded like every event and counted in the
resource's last ``MAX_EVENTS_PER_RESOURCE``. Does not import sqlite3.
"""

from __future__ import annotations

import re
from typing import Any

from ...errors import LimitError
from ...limits import validate_key
from .bounds import validate_controller_name, validate_resource_key
from .core import CtlBase
from .records import CtlEvent

MAX_READ = 1000
# A reconcile's own event types: lower-case words; never one the store writes itself.
APPEND_TYPE_PATTERN = r"^[a-z][a-z0-9_]{0,31}$"
STORE_EVENT_TYPES = frozenset({
    "applied", "spec_changed", "enqueued", "reconcile_started", "settled", "requeued",
    "conflict", "error", "deleted", "delete_requested", "status_written",
    "finalizer_added", "finalizer_removed", "effect_reserved", "effect_applied",
    "effect_rejected", "effect_indeterminate", "child_reserved", "child_started",
    "child_interrupted", "child_ended"})


class CtlEventOps(CtlBase):
    def append_controller_event(self, controller: str, key: str, type_: str,
                                message: object, data: dict[str, Any] | None = None, *,
                                token: str) -> int:
        """Append one event for the reconcile holding ``token``; its ``seq``.

        ``type_`` is a lower-case word that is not one of the store's own
        types (``invalid_event_type``); ``message`` is redacted and bounded,
        ``data`` at most 64 KiB. Fenced by the claim: a token no longer
        current raises ``ClaimLost`` and writes nothing. The event counts in
        the resource's last ``MAX_EVENTS_PER_RESOURCE``.
        """
        validate_controller_name(controller)
        validate_resource_key(key)
        validate_key(token, "claim token")
        if not isinstance(type_, str) or not re.fullmatch(APPEND_TYPE_PATTERN, type_) \
                or type_ in STORE_EVENT_TYPES:
            raise LimitError(f"invalid event type {repr(type_)[:40]}: use a lower-case word"
                             " (a-z 0-9 _, at most 32) that is not one the store writes",
                             code="invalid_event_type")
        if data is not None and not isinstance(data, dict):
            raise LimitError("event data must be an object", code="invalid_event_data")
        now = self._now()
        with self._db.transaction() as tx:
            self._ctl_fence(tx, controller, key, token)
            uid = tx.scalar("SELECT uid FROM controller_resources WHERE controller = ? AND"
                            " key = ?", (controller, key))
            return self._ctl_event(tx, controller, key, uid, type_, now, message, data)

    def resource_events(self, controller: str, key: str, *, limit: int = 50) -> list[CtlEvent]:
        """The resource's last ``limit`` events, oldest first."""
        validate_controller_name(controller)
        validate_resource_key(key)
        with self._db.transaction(write=False) as tx:
            rows = tx.all("SELECT * FROM controller_events WHERE controller = ? AND key = ?"
                          " ORDER BY seq DESC LIMIT ?",
                          (controller, key, max(0, min(int(limit), MAX_READ))))
        return [CtlEvent.from_row(r) for r in reversed(rows)]

    def controller_events_after(self, after_seq: int, *, controller: str | None = None,
                                key: str | None = None, limit: int = 500) -> list[CtlEvent]:
        """Events with ``seq > after_seq`` (of one controller, or one resource), oldest first."""
        where: list[str] = ["seq > ?"]
        params: list[Any] = [int(after_seq)]
        if controller is not None:
            where.append("controller = ?")
            params.append(validate_controller_name(controller))
        if key is not None:
            where.append("key = ?")
            params.append(validate_resource_key(key))
        with self._db.transaction(write=False) as tx:
            rows = tx.all(f"SELECT * FROM controller_events WHERE {' AND '.join(where)}"
                          " ORDER BY seq LIMIT ?", (*params, max(0, min(int(limit), MAX_READ))))
        return [CtlEvent.from_row(r) for r in rows]

    def gone_resource_events(self, before_ms: int, *, remove: bool = False) -> int:
        """Events of resources that no longer exist, whose newest is older than ``before_ms``.

        A deleted resource's events outlive its row (``controller events`` and
        ``get`` still explain the deletion); ``gc`` removes them once the
        newest is past its cutoff. A key applied again has a row, so its
        history stays (bounded per key). Counts them; deletes them too with
        ``remove``.
        """
        gone = ("SELECT e.controller, e.key FROM controller_events AS e"
                " LEFT JOIN controller_resources AS r"
                " ON r.controller = e.controller AND r.key = e.key"
                " WHERE r.key IS NULL GROUP BY e.controller, e.key HAVING max(e.at) < ?")
        with self._db.transaction(write=remove) as tx:
            if not remove:
                return int(tx.scalar(f"SELECT count(*) FROM controller_events WHERE"
                                     f" (controller, key) IN ({gone})", (int(before_ms),)) or 0)
            return tx.execute(f"DELETE FROM controller_events WHERE (controller, key) IN"
                              f" ({gone})", (int(before_ms),))

    def last_controller_seq(self) -> int:
        """The newest event's ``seq`` (0: none): where ``events --follow`` starts."""
        with self._db.transaction(write=False) as tx:
            return int(tx.scalar("SELECT coalesce(max(seq), 0) FROM controller_events") or 0)
