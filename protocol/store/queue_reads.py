"""Read-only views of the run queue: one run, a listing, a session's reservation.

Deferred (read) transactions only; nothing here changes a row. No sqlite3.
"""

from __future__ import annotations

from ..errors import UsageError
from ..limits import validate_run_id
from ..states import ACTIVE, QUEUE_STATES, sql_list
from .base import StoreBase
from .records import QueueRow


class QueueReads(StoreBase):
    def get(self, run_id: str) -> QueueRow | None:
        validate_run_id(run_id)
        with self._db.transaction(write=False) as tx:
            row = tx.one("SELECT * FROM workflow_run_queue WHERE run_id = ?", (run_id,))
        return None if row is None else QueueRow.from_row(row)

    def list_runs(self, state: str | None = None, *, limit: int = 1000) -> list[QueueRow]:
        if state is not None and state not in QUEUE_STATES:
            raise UsageError(f"unknown queue state {state!r}; use one of {', '.join(QUEUE_STATES)}")
        with self._db.transaction(write=False) as tx:
            if state is None:
                rows = tx.all("SELECT * FROM workflow_run_queue ORDER BY created_at, run_id"
                              " LIMIT ?", (limit,))
            else:
                rows = tx.all("SELECT * FROM workflow_run_queue WHERE state = ?"
                              " ORDER BY created_at, run_id LIMIT ?", (state, limit))
        return [QueueRow.from_row(r) for r in rows]

    def forks_of(self, run_ids: list[str]) -> dict[str, list[str]]:
        """Each run's forks (``pi-workflows fork``), oldest first; runs without any are absent."""
        found: dict[str, list[str]] = {}
        with self._db.transaction(write=False) as tx:
            for start in range(0, len(run_ids), 500):  # SQLite's bound-parameter limit
                chunk = run_ids[start:start + 500]
                rows = tx.all("SELECT run_id, forked_from FROM workflow_run_queue WHERE"
                              f" forked_from IN ({','.join('?' * len(chunk))})"
                              " ORDER BY created_at, run_id", chunk)
                for row in rows:
                    found.setdefault(str(row["forked_from"]), []).append(str(row["run_id"]))
        return found

    def session_run(self, session: str) -> QueueRow | None:
        """The session's reservation, else the latest run it started or is told about."""
        found = self.find_session_reservation(session)
        if found is not None:
            return found
        with self._db.transaction(write=False) as tx:
            row = tx.one("SELECT * FROM workflow_run_queue WHERE origin_session = ?"
                         " OR notify_session = ? ORDER BY created_at DESC, run_id DESC LIMIT 1",
                         (session, session))
        return None if row is None else QueueRow.from_row(row)

    def find_session_reservation(self, session: str) -> QueueRow | None:
        """The session's one active (queued/starting/running) run, if any."""
        with self._db.transaction(write=False) as tx:
            row = tx.one("SELECT * FROM workflow_run_queue WHERE origin_session = ? AND state IN"
                         f" {sql_list(ACTIVE)}", (session,))
        return None if row is None else QueueRow.from_row(row)
