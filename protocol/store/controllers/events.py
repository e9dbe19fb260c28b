"""Reads of the controller event table (``get``'s last 50, ``events --follow``).

Owns only reads: events are written inside other writes (``core._ctl_event``),
bounded to the last ``MAX_EVENTS_PER_RESOURCE`` per resource. Does not
import sqlite3.
"""

from __future__ import annotations

from typing import Any

from .bounds import validate_controller_name, validate_resource_key
from .core import CtlBase
from .records import CtlEvent

MAX_READ = 1000


class CtlEventOps(CtlBase):
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

    def last_controller_seq(self) -> int:
        """The newest event's ``seq`` (0: none): where ``events --follow`` starts."""
        with self._db.transaction(write=False) as tx:
            return int(tx.scalar("SELECT coalesce(max(seq), 0) FROM controller_events") or 0)
