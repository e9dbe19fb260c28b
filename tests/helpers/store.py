"""Store builders shared by the store, gc and run-reference tests.

Owns ``SOURCE`` (a run source), ``lapse`` (a claim watched for a lease),
``put_in_state`` (a row driven to any queue
state) and raw reads of the file (``raw_row``, ``all_rows``, ``snapshot``).
Importable by spawned child processes: it must not import pytest, a
conftest or a test module.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pi_workflows.protocol.store import RunEvent, RunSource, Store

from .clocks import FakeClock

SOURCE = RunSource("echo", "/project/.pi/workflows/echo.workflow.py", "ab" * 32,
                   "sha256:" + "0" * 64)


def where_of(store: Store) -> str:
    """What a child process opens the same store from: a SQLite path or a store URL."""
    return store.url or str(store.path)


def child_store(where: str, **kwargs: Any) -> Store:
    """A child process's own store, from ``where_of``'s answer (either engine)."""
    if where.startswith(("postgresql://", "postgres://")):
        return Store(Path(os.devnull), url=where, **kwargs)
    return Store(Path(where), **kwargs)


def raw_row(where: Store | Path, run_id: str) -> dict[str, Any] | None:
    """The queue row exactly as stored, private input included: through the store's
    own backend (either engine), or a read-only connection to a SQLite file."""
    sql = "SELECT * FROM workflow_run_queue WHERE run_id = ?"
    if isinstance(where, Store):
        with where._db.transaction(write=False) as tx:
            return tx.one(sql, (run_id,))
    conn = sqlite3.connect(f"file:{where}?mode=ro", uri=True)
    try:
        conn.row_factory = sqlite3.Row
        row = conn.execute(sql, (run_id,)).fetchone()
        return None if row is None else dict(row)
    finally:
        conn.close()


def all_rows(where: Store | Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table, for searching stored values (either engine)."""
    if isinstance(where, Store):
        with where._db.transaction(write=False) as tx:
            if tx.dialect == "postgres":
                names = [str(r["tablename"]) for r in tx.all(
                    "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")]
            else:
                names = [str(r["name"]) for r in tx.all(
                    "SELECT name FROM sqlite_master WHERE type = 'table'"
                    " AND name NOT LIKE 'sqlite_%'")]
            return {n: [tuple(r.values()) for r in tx.all(f"SELECT * FROM {n}")]
                    for n in names}
    conn = sqlite3.connect(f"file:{where}?mode=ro", uri=True)
    try:
        names = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]
        return {n: conn.execute(f"SELECT * FROM {n}").fetchall() for n in names}
    finally:
        conn.close()


def lapse(store: Store, mono: FakeClock[float], ms: int | None = None) -> None:
    """The store watches every claim, then a lease (or ``ms``) of its monotonic time
    passes: what it takes for the store to see a claim stalled."""
    store.watch_claims()
    mono.advance((store.lease_ms if ms is None else ms) / 1000)


def events(store: Store, run_id: str) -> list[RunEvent]:
    return store.events_since(0, run_id=run_id)


@dataclass(frozen=True)
class Snapshot:
    row: dict[str, Any] | None
    events: list[RunEvent]


def snapshot(store: Store, run_id: str) -> Snapshot:
    return Snapshot(raw_row(store, run_id), events(store, run_id))


def put_in_state(store: Store, run_id: str, state: str, *,
                 private_input: Any = None) -> str:
    """Create ``run_id`` and drive it to ``state``; return its current or last claim token."""
    data = {"task": run_id} if private_input is None else private_input
    if state == "queued":
        store.enqueue_detached(run_id, SOURCE, data)
        return "never-claimed-" + run_id
    if state == "cancelled":
        store.enqueue_detached(run_id, SOURCE, data)
        store.cancel(run_id)
        return "never-claimed-" + run_id
    store.enqueue_detached(run_id, SOURCE, data)
    token = store.claim_by_id(run_id, "runner-a").token
    if state == "starting":
        return token
    if state == "failed":
        store.fail(run_id, token, "activation_failed", "it broke")
        return token
    store.mark_running(run_id, token)
    if state == "running":
        return token
    if state == "parked":
        store.park(run_id, token)
        return token
    if state == "done":
        store.finish(run_id, token)
        return token
    raise ValueError(state)
