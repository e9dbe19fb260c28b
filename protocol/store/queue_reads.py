"""Read-only views of the run queue: one run, a listing, a session's reservation, chains.

Also finds the runs a short run reference (a prefix, or the trailing hex part)
may mean, and the continuations that link runs into chains. Deferred (read)
transactions only; nothing here changes a row. No sqlite3.
"""

from __future__ import annotations

import json

from ..errors import UsageError
from ..limits import validate_run_id
from ..states import ACTIVE, QUEUE_STATES, QueueState, sql_list
from .base import StoreBase
from .records import QueueRow

# A continuation in these states frees its parent's one-continuation slot
# (the schema's workflow_run_queue_one_continuation index says the same).
_GAVE_UP: frozenset[QueueState] = frozenset({QueueState.FAILED, QueueState.CANCELLED})
_HEX = frozenset("0123456789abcdefABCDEF")


class QueueReads(StoreBase):
    def get(self, run_id: str) -> QueueRow | None:
        validate_run_id(run_id)
        with self._db.transaction(write=False) as tx:
            row = tx.one("SELECT * FROM workflow_run_queue WHERE run_id = ?", (run_id,))
        return None if row is None else QueueRow.from_row(row)

    def launch_agent_dir(self, run_id: str) -> str | None:
        """The Pi agent dir the run was queued with (its first ``queued`` event), if any."""
        validate_run_id(run_id)
        with self._db.transaction(write=False) as tx:
            text = tx.scalar("SELECT payload FROM run_events WHERE run_id = ? AND type = ?"
                             " ORDER BY seq LIMIT 1", (run_id, QueueState.QUEUED.value))
        try:
            value = json.loads(text).get("agentDir") if text else None
        except (ValueError, AttributeError):
            return None
        return value if isinstance(value, str) and value else None

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

    def recent_runs(self, *, workflow: str | None = None, since_ms: int | None = None,
                    until_ms: int | None = None, limit: int | None = None,
                    offset: int = 0) -> list[QueueRow]:
        """Runs newest first, optionally of one workflow and created in ``[since_ms, until_ms]``.

        ``offset`` skips that many of the newest matches, then ``limit`` bounds the rest.
        """
        where: list[str] = ["1 = 1"]
        params: list[str | int] = []
        if workflow is not None:
            where.append("workflow = ?")
            params.append(workflow)
        if since_ms is not None:
            where.append("created_at >= ?")
            params.append(since_ms)
        if until_ms is not None:
            where.append("created_at <= ?")
            params.append(until_ms)
        # No limit, in a form both engines take (SQLite's -1 is an error in PostgreSQL).
        params.append(2**62 if limit is None else limit)
        params.append(offset)
        with self._db.transaction(write=False) as tx:
            rows = tx.all(f"SELECT * FROM workflow_run_queue WHERE {' AND '.join(where)}"
                          " ORDER BY created_at DESC, run_id DESC LIMIT ? OFFSET ?", params)
        return [QueueRow.from_row(r) for r in rows]

    def recent_run_ids(self, prefix: str, *, limit: int) -> list[str]:
        """Run ids that start with ``prefix``, newest first, at most ``limit`` (completion)."""
        with self._db.transaction(write=False) as tx:
            rows = tx.all("SELECT run_id FROM workflow_run_queue WHERE substr(run_id, 1, ?) = ?"
                          " ORDER BY created_at DESC, run_id DESC LIMIT ?",
                          (len(prefix), prefix, limit))
        return [str(r["run_id"]) for r in rows]

    def match_run_ids(self, text: str, *, limit: int = 10) -> list[str]:
        """Run ids that start with ``text``, or whose part after the last ``-`` does.

        Oldest first, at most ``limit``. The hex form is only tried for
        hexadecimal text, so ``status 99624cea`` finds ``...-review-99624cea``.
        """
        with self._db.transaction(write=False) as tx:
            found = [r["run_id"] for r in tx.all(
                "SELECT run_id FROM workflow_run_queue WHERE substr(run_id, 1, ?) = ?"
                " ORDER BY created_at, run_id LIMIT ?", (len(text), text, limit))]
            if set(text) <= _HEX:
                # Hex digits have no LIKE wildcards; the exact test is below.
                rows = tx.all("SELECT run_id FROM workflow_run_queue WHERE run_id LIKE ?"
                              " ORDER BY created_at, run_id", (f"%-{text}%",))
                found += [r["run_id"] for r in rows if r["run_id"] not in found
                          and r["run_id"].rsplit("-", 1)[-1].startswith(text)]
        return found[:limit]

    def continuations(self) -> dict[str, str]:
        """Parent run id -> its live continuation (one that did not fail or was cancelled)."""
        with self._db.transaction(write=False) as tx:
            rows = tx.all("SELECT parent_run_id, run_id FROM workflow_run_queue WHERE"
                          f" parent_run_id IS NOT NULL AND state NOT IN {sql_list(_GAVE_UP)}")
        return {r["parent_run_id"]: r["run_id"] for r in rows}

    def continuation_of(self, parent_run_id: str) -> QueueRow | None:
        """The parent's live continuation, if it has one."""
        validate_run_id(parent_run_id)
        with self._db.transaction(write=False) as tx:
            row = tx.one("SELECT * FROM workflow_run_queue WHERE parent_run_id = ? AND state"
                         f" NOT IN {sql_list(_GAVE_UP)}", (parent_run_id,))
        return None if row is None else QueueRow.from_row(row)

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
