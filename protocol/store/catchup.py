"""What a session has not seen yet: the runs that changed since its watermark.

Owns the catch-up read of ``sync`` (seed 000, decisions 10 and 11) and the
session watermark's two steps. ``begin_catch_up`` reads, in one
transaction, the feed's head, the rows of every run with a feed event past
the session's watermark (or, the first time, the session's own runs and
the project's parked and waiting ones), and moves the watermark to the head
*before* anything is shown, remembering where it came from in
``pending_from`` (``-1`` for a first sync). ``end_catch_up`` clears that
once the snapshot was delivered. A sync that dies in between leaves ``pending_from`` set, and the
next one starts from there: the lost snapshot is subsumed, never lost. The
watermark itself never moves backwards. Does not import sqlite3.
"""

from __future__ import annotations

from ..limits import validate_session_id
from ..record import record
from ..states import QueueState, sql_list
from .base import StoreBase
from .records import QueueRow

Q = QueueState
FIRST = -1  # pending_from while a session's first sync is being delivered
# A finished run whose bundle waits at a checkpoint, and no live continuation.
# A wait closed by `cancel` (``close_wait``: the cancel flag on a done row) is over.
_WAITING = (
    f"(q.state = '{Q.DONE}' AND q.cancel_requested = 0"
    " AND EXISTS (SELECT 1 FROM run_events e WHERE e.run_id = q.run_id"
    f" AND e.type = '{Q.DONE}' AND e.payload LIKE '%\"runStatus\":\"waiting\"%')"
    " AND NOT EXISTS (SELECT 1 FROM workflow_run_queue c WHERE c.parent_run_id = q.run_id"
    f" AND c.state NOT IN {sql_list(frozenset({Q.FAILED, Q.CANCELLED}))}))"
)


@record(frozen=True)
class CatchUp:
    session_id: str
    since: int  # the feed sequence number the snapshot starts after
    head: int  # the feed sequence number it is as of: the new watermark
    first: bool  # the session had never synced
    rows: list[QueueRow]


class CatchUpOps(StoreBase):
    def begin_catch_up(self, session_id: str) -> CatchUp:
        validate_session_id(session_id)
        now = self._now()
        with self._db.transaction() as tx:
            mark = tx.one("SELECT seq, pending_from FROM session_watermarks"
                          " WHERE session_id = ?", (session_id,))
            head = int(tx.scalar("SELECT coalesce(max(seq), 0) FROM run_events"))
            # A first sync that died before it was confirmed is still a first sync.
            if mark is None or mark["pending_from"] == FIRST:
                since, first = 0, True
                rows = tx.all(
                    "SELECT q.* FROM workflow_run_queue q WHERE q.origin_session = ?"
                    f" OR q.notify_session = ? OR q.state = '{Q.PARKED}' OR {_WAITING}"
                    " ORDER BY q.created_at, q.run_id", (session_id, session_id))
            else:
                seq, pending = int(mark["seq"]), mark["pending_from"]
                since, first = (seq if pending is None else int(pending)), False
                rows = tx.all(
                    "SELECT q.* FROM workflow_run_queue q WHERE q.run_id IN (SELECT run_id FROM"
                    " run_events WHERE seq > ? AND seq <= ?) ORDER BY q.created_at, q.run_id",
                    (since, head))
            head = max(head, since)
            pending = FIRST if first else since
            tx.execute(
                "INSERT INTO session_watermarks(session_id, seq, pending_from, updated_at)"
                " VALUES (?, ?, ?, ?) ON CONFLICT(session_id) DO UPDATE SET"
                # The larger seq, and the smaller pending_from where both are set
                # (NULL, nothing pending, if the new one is NULL), spelt in CASE
                # since the engines' two-argument max/min treat NULL differently.
                " seq = CASE WHEN excluded.seq > session_watermarks.seq"
                " THEN excluded.seq ELSE session_watermarks.seq END,"
                " pending_from = CASE WHEN excluded.pending_from IS NULL THEN NULL"
                " WHEN session_watermarks.pending_from IS NULL"
                " OR session_watermarks.pending_from > excluded.pending_from"
                " THEN excluded.pending_from ELSE session_watermarks.pending_from END,"
                " updated_at = excluded.updated_at",
                (session_id, head, pending, now))
        return CatchUp(session_id, since, head, first, [QueueRow.from_row(r) for r in rows])

    def waiting_runs(self) -> list[QueueRow]:
        """Runs that wait for an answer: done in the queue, waiting in the bundle, unanswered."""
        with self._db.transaction(write=False) as tx:
            rows = tx.all(f"SELECT q.* FROM workflow_run_queue q WHERE {_WAITING}"
                          " ORDER BY q.created_at, q.run_id")
        return [QueueRow.from_row(r) for r in rows]

    def nothing_new(self, session_id: str) -> bool:
        """A read-only check: no feed event past the watermark, nothing pending.

        Lets an idle ``sync --follow`` poll without taking the write lock.
        """
        with self._db.transaction(write=False) as tx:
            mark = tx.one("SELECT seq, pending_from FROM session_watermarks"
                          " WHERE session_id = ?", (session_id,))
            if mark is None or mark["pending_from"] is not None:
                return False
            head = int(tx.scalar("SELECT coalesce(max(seq), 0) FROM run_events"))
            if head > int(mark["seq"]):
                return False
            return not tx.one(
                "SELECT 1 FROM workflow_notifications WHERE session_id = ? AND delivered_at"
                " IS NULL UNION ALL SELECT 1 FROM workflow_turn_intents WHERE session_id = ?"
                " AND state = 'pending' LIMIT 1", (session_id, session_id))

    def end_catch_up(self, catch_up: CatchUp) -> None:
        """The snapshot was delivered: the next one starts at its head."""
        with self._db.transaction() as tx:
            tx.execute("UPDATE session_watermarks SET pending_from = NULL, updated_at = ?"
                       " WHERE session_id = ? AND seq = ?",
                       (self._now(), catch_up.session_id, catch_up.head))
