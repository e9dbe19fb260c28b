"""Store errors: classification, backoff, and a writer that holds the lock for 3 s."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest
from pi_workflows.protocol.errors import (
    StoreError,
    StorePermanentError,
    StoreTransientError,
)
from pi_workflows.protocol.retry import backoff_delays, retry_store
from pi_workflows.protocol.store import Store
from pi_workflows.protocol.store.db import ConstraintViolation, classify

from tests.helpers import children, processes
from tests.helpers.clocks import FakeClock
from tests.helpers.store import SOURCE

# ---- classify ----------------------------------------------------------------------


def _coded(code: int, text: str) -> sqlite3.Error:
    exc = sqlite3.OperationalError(text)
    exc.sqlite_errorcode = code
    return exc


def test_real_busy_is_transient(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite3"
    holder = sqlite3.connect(path, isolation_level=None)
    other = sqlite3.connect(path, isolation_level=None, timeout=0)
    try:
        holder.execute("BEGIN IMMEDIATE")
        with pytest.raises(sqlite3.OperationalError) as info:
            other.execute("BEGIN IMMEDIATE")
        assert isinstance(classify(info.value), StoreTransientError)
    finally:
        holder.close()
        other.close()


@pytest.mark.parametrize(("code", "text"), [
    (5, "database is locked"),  # SQLITE_BUSY
    (6, "database table is locked"),  # SQLITE_LOCKED
    (6 | (1 << 8), "database table is locked"),  # SQLITE_LOCKED_SHAREDCACHE
    (10, "disk I/O error"),  # SQLITE_IOERR
    (10 | (3 << 8), "disk I/O error"),  # SQLITE_IOERR_WRITE
    (5 | (2 << 8), "database is locked"),  # SQLITE_BUSY_SNAPSHOT
])
def test_transient_codes(code: int, text: str) -> None:
    assert isinstance(classify(_coded(code, text)), StoreTransientError)


def test_locked_without_a_code_is_transient() -> None:
    assert isinstance(classify(sqlite3.OperationalError("database is locked")),
                      StoreTransientError)


def test_constraint_is_permanent(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "db.sqlite3")
    try:
        conn.execute("CREATE TABLE t (k TEXT PRIMARY KEY)")
        conn.execute("INSERT INTO t VALUES ('a')")
        with pytest.raises(sqlite3.IntegrityError) as info:
            conn.execute("INSERT INTO t VALUES ('a')")
    finally:
        conn.close()
    result = classify(info.value)
    assert isinstance(result, ConstraintViolation) and isinstance(result, StorePermanentError)


@pytest.mark.parametrize(("code", "text"), [
    (11, "database disk image is malformed"),  # SQLITE_CORRUPT
    (26, "file is not a database"),  # SQLITE_NOTADB
    (1, "no such table: x"),  # SQLITE_ERROR
])
def test_permanent_codes(code: int, text: str) -> None:
    result = classify(_coded(code, text))
    assert isinstance(result, StorePermanentError)
    assert not isinstance(result, StoreTransientError)


def test_store_errors_pass_through() -> None:
    err = StoreTransientError("x")
    assert classify(err) is err


def test_a_transaction_aborted_by_sqlite_surfaces_as_a_store_error(store: Store) -> None:
    """Regression: when SQLite had already rolled back (interrupt, full disk, I/O error),
    the second ROLLBACK raised a raw sqlite3 error that hid the real one."""
    conn = store._db._conn
    armed = False

    def trace(sql: str) -> None:
        nonlocal armed
        armed = sql.startswith("INSERT INTO run_events")

    conn.set_trace_callback(trace)
    conn.set_progress_handler(lambda: 1 if armed else 0, 1)
    try:
        with pytest.raises(StoreError, match="interrupted"):
            store.enqueue_detached("r1", SOURCE, {})
    finally:
        conn.set_progress_handler(None, 1)
        conn.set_trace_callback(None)
    assert store.get("r1") is None  # the whole transaction is gone
    store.enqueue_detached("r1", SOURCE, {})  # and the connection is usable


# ---- retry_store with an injected clock ------------------------------------------------


def test_retry_until_success() -> None:
    fake = FakeClock(0.0)
    calls = []
    retries: list[int] = []

    def op() -> str:
        calls.append(fake.now)
        if len(calls) < 4:
            raise StoreTransientError("busy")
        return "ok"

    result = retry_store(op, sleep=fake.sleep, monotonic=fake,
                         on_retry=lambda n, exc, pause: retries.append(n))
    assert result == "ok" and len(calls) == 4
    assert retries == [0, 1, 2] and len(fake.sleeps) == 3
    assert all(0 <= s <= min(1.0, 0.01 * 2**i) for i, s in enumerate(fake.sleeps))


def test_retry_gives_up_at_the_deadline() -> None:
    fake = FakeClock(0.0)
    calls = 0

    def op() -> None:
        nonlocal calls
        calls += 1
        raise StoreTransientError("still busy")

    with pytest.raises(StoreTransientError, match="still busy"):
        retry_store(op, deadline_s=5.0, sleep=fake.sleep, monotonic=fake)
    assert calls > 1 and fake.now <= 5.0  # never sleeps past the deadline
    assert calls == len(fake.sleeps) + 1


@pytest.mark.parametrize("error", [StorePermanentError("corrupt"), ConstraintViolation("dup"),
                                   ValueError("bug")])
def test_permanent_errors_are_not_retried(error: Exception) -> None:
    fake = FakeClock(0.0)
    calls = 0

    def op() -> None:
        nonlocal calls
        calls += 1
        raise error

    with pytest.raises(type(error)):
        retry_store(op, sleep=fake.sleep, monotonic=fake)
    assert calls == 1 and fake.sleeps == []


def test_backoff_is_jittered_and_capped() -> None:
    delay = backoff_delays(base=0.01, cap=0.5, rng=random.Random(7))
    for attempt in range(0, 64):
        assert 0 <= delay(attempt) <= min(0.5, 0.01 * 2**attempt)
    assert len({delay(10) for _ in range(20)}) > 1


# ---- a real writer holding the lock -----------------------------------------------------


@pytest.mark.slow  # a real process holds the lock for 3 s
@pytest.mark.timeout(60)
def test_callers_back_off_while_another_process_holds_the_write_lock(store_path: Path) -> None:
    with Store(store_path, busy_timeout_ms=100) as store:
        store.enqueue_detached("before", SOURCE, {})
        parent, child = processes.CTX.Pipe()
        proc = processes.start(children.hold_write_lock, str(store_path), 3.0, child)
        try:
            assert parent.poll(30) and parent.recv() == "locked"
            retries: list[int] = []
            row = retry_store(lambda: store.enqueue_detached("after", SOURCE, {}),
                              on_retry=lambda n, exc, pause: retries.append(n))
            assert row.state == "queued"
            assert len(retries) > 0
            assert parent.poll(30) and parent.recv() == "released"
            processes.join_all([proc], timeout_s=30)
        finally:
            processes.reap(proc)
        assert {r.run_id for r in store.list_runs()} == {"before", "after"}
