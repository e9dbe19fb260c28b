"""Opening the store: private modes, the exact layout, refusing anything else untouched."""

from __future__ import annotations

import hashlib
import sqlite3
import stat
from collections.abc import Callable
from pathlib import Path

import pytest
from pi_workflows.protocol.errors import StoreIncompatible
from pi_workflows.protocol.settings import load_settings
from pi_workflows.protocol.store import SCHEMA_ID, Store, open_store
from pi_workflows.protocol.store.schema import SCHEMA_STATEMENTS

from tests.helpers import children, processes
from tests.helpers.store import SOURCE


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_fresh_store_is_private(store_path: Path) -> None:
    with Store(store_path) as store:
        store.enqueue_detached("r1", SOURCE, {})
        assert _mode(store_path.parent) == 0o700
        for name in ("store.sqlite3", "store.sqlite3-wal", "store.sqlite3-shm"):
            assert _mode(store_path.parent / name) == 0o600, name


def test_existing_directory_is_tightened(store_path: Path) -> None:
    store_path.parent.mkdir(mode=0o755, parents=True)
    store_path.parent.chmod(0o755)
    Store(store_path).close()
    assert _mode(store_path.parent) == 0o700


def test_wal_and_pragmas(store_path: Path) -> None:
    settings = load_settings(sqlite_synchronous="FULL", busy_timeout_ms=1234)
    with open_store(settings, store_path) as store:
        conn = store._db._conn
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
        assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 1234
    with Store(store_path, synchronous="NORMAL") as store:
        assert store._db._conn.execute("PRAGMA synchronous").fetchone()[0] == 1


def test_reopen_keeps_data(store_path: Path) -> None:
    with Store(store_path) as store:
        store.enqueue_detached("r1", SOURCE, {"a": 1})
    with Store(store_path) as store:
        row = store.get("r1")
        assert row is not None and row.state == "queued"


def test_zero_byte_file_is_filled_in(store_path: Path) -> None:
    store_path.parent.mkdir(mode=0o700, parents=True)
    store_path.touch(mode=0o600)
    with Store(store_path) as store:
        store.enqueue_detached("r1", SOURCE, {})
    conn = sqlite3.connect(store_path)
    try:
        assert conn.execute("SELECT value FROM store_meta").fetchone()[0] == SCHEMA_ID
    finally:
        conn.close()


def test_empty_sqlite_database_is_filled_in(store_path: Path) -> None:
    store_path.parent.mkdir(mode=0o700, parents=True)
    conn = sqlite3.connect(store_path)
    conn.execute("PRAGMA user_version = 0")
    conn.execute("VACUUM")
    conn.close()
    assert store_path.stat().st_size > 0
    with Store(store_path) as store:
        store.enqueue_detached("r1", SOURCE, {})


@pytest.mark.slow  # a race of real processes
@pytest.mark.timeout(60)
def test_concurrent_first_open_creates_one_store(store_path: Path) -> None:
    count = 6
    barrier = processes.CTX.Barrier(count)
    procs = [processes.start(children.open_and_enqueue, str(store_path), f"r{i}", barrier)
             for i in range(count)]
    processes.join_all(procs)
    with Store(store_path) as store:
        assert sorted(r.run_id for r in store.list_runs()) == [f"r{i}" for i in range(count)]
    assert _mode(store_path) == 0o600


# ---- incompatible files ---------------------------------------------------------


def _sqlite_file(path: Path, statements: list[str], *, wal: bool = False) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    conn = sqlite3.connect(path, isolation_level=None)
    if wal:
        conn.execute("PRAGMA journal_mode = WAL")
    for statement in statements:
        conn.execute(statement)
    conn.close()


def _plain_file(path: Path, data: bytes) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.write_bytes(data)


def _v1_with(replace: Callable[[str], str], schema_id: str | None = SCHEMA_ID) -> list[str]:
    statements = [replace(s) for s in SCHEMA_STATEMENTS]
    if schema_id is not None:
        statements.append(f"INSERT INTO store_meta(key, value) VALUES ('schema', '{schema_id}')")
    return statements


FOREIGN: dict[str, Callable[[Path], None]] = {
    "another_app": lambda p: _sqlite_file(p, [
        "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)",
        "INSERT INTO notes(body) VALUES ('keep me')"]),
    "column_missing": lambda p: _sqlite_file(p, _v1_with(
        lambda s: s.replace("    cancel_requested INTEGER NOT NULL DEFAULT 0,\n", ""))),
    # A store made before `fork` (no fork columns, check or index): refused like any
    # earlier alpha layout (docs/store.md).
    "before_forks": lambda p: _sqlite_file(p, [
        s for s in _v1_with(lambda s: s.replace("    forked_from TEXT,\n    fork_node TEXT,\n", "")
                            .replace(",\n    CHECK ((forked_from IS NOT NULL) = (fork_node IS NOT"
                                     " NULL))", ""))
        if "workflow_run_queue_by_fork" not in s]),
    "other_schema_id": lambda p: _sqlite_file(p, _v1_with(
        lambda s: s, "pi-workflows.store.v0")),
    "no_schema_id": lambda p: _sqlite_file(p, _v1_with(lambda s: s, None)),
    "extra_index": lambda p: _sqlite_file(p, [
        *_v1_with(lambda s: s), "CREATE INDEX extra ON runners(pid)"]),
    "foreign_wal_db": lambda p: _sqlite_file(p, [
        "CREATE TABLE workflow_run_queue (run_id TEXT PRIMARY KEY)"], wal=True),
    "not_sqlite": lambda p: _plain_file(p, b"this is a text file, not a database\n" * 200),
    "short_garbage": lambda p: _plain_file(p, b"\x00\x01garbage"),
}


@pytest.mark.parametrize("kind", sorted(FOREIGN))
def test_incompatible_store_is_refused_untouched(store_path: Path, kind: str) -> None:
    FOREIGN[kind](store_path)
    digest = _digest(store_path)
    mtime = store_path.stat().st_mtime_ns
    siblings = sorted(p.name for p in store_path.parent.iterdir())
    with pytest.raises(StoreIncompatible) as info:
        Store(store_path)
    message = str(info.value)
    assert "move it aside" in message and str(store_path) in message
    assert info.value.exit_code == 5
    assert _digest(store_path) == digest and store_path.stat().st_mtime_ns == mtime
    if kind != "foreign_wal_db":  # a WAL database has its own -wal/-shm files
        assert sorted(p.name for p in store_path.parent.iterdir()) == siblings
        assert not store_path.with_name(store_path.name + "-wal").exists()
    with pytest.raises(StoreIncompatible):  # and it stays refused
        Store(store_path)
    assert _digest(store_path) == digest


def test_moving_it_aside_lets_a_new_store_start(store_path: Path) -> None:
    FOREIGN["other_schema_id"](store_path)
    with pytest.raises(StoreIncompatible):
        Store(store_path)
    store_path.rename(store_path.with_name("store.sqlite3.old"))
    with Store(store_path) as store:
        store.enqueue_detached("r1", SOURCE, {})


def _wal_crash(path: Path, rows: int = 20) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    proc = processes.start(children.crash_with_wal, str(path), rows)
    processes.join_all([proc], timeout_s=30)
    assert path.with_name(path.name + "-wal").stat().st_size > 0


def _count_notes(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("SELECT count(*) FROM notes").fetchone()[0])
    finally:
        conn.close()


@pytest.mark.timeout(60)
def test_reset_instruction_moves_the_wal_too(store_path: Path) -> None:
    """Following the printed instruction keeps the old store whole, commits in -wal included."""
    _wal_crash(store_path)
    wal = store_path.with_name("store.sqlite3-wal")
    wal_digest = _digest(wal)
    with pytest.raises(StoreIncompatible) as info:
        Store(store_path)
    assert _digest(wal) == wal_digest
    message = str(info.value)
    assert f"mv '{wal}' '{store_path}.old-wal'" in message
    for src in (store_path, wal, store_path.with_name("store.sqlite3-shm")):
        src.rename(src.with_name(src.name.replace("store.sqlite3", "store.sqlite3.old")))
    with Store(store_path) as store:
        store.enqueue_detached("r1", SOURCE, {})
    assert _count_notes(store_path.with_name("store.sqlite3.old")) == 20


@pytest.mark.timeout(60)
def test_a_wal_left_without_its_store_is_refused(store_path: Path) -> None:
    """Regression: moving only the main file aside let a new store discard the old -wal."""
    _wal_crash(store_path)
    store_path.rename(store_path.with_name("store.sqlite3.old"))
    wal = store_path.with_name("store.sqlite3-wal")
    wal_digest = _digest(wal)
    with pytest.raises(StoreIncompatible, match="move it aside"):
        Store(store_path)
    assert _digest(wal) == wal_digest and not store_path.exists()
    wal.rename(store_path.with_name("store.sqlite3.old-wal"))
    store_path.with_name("store.sqlite3-shm").rename(store_path.with_name("store.sqlite3.old-shm"))
    assert _count_notes(store_path.with_name("store.sqlite3.old")) == 20
    Store(store_path).close()


@pytest.mark.parametrize("name", ["what?", "hash#tag", "pct%41", "with space"])
def test_odd_characters_in_the_path(tmp_path: Path, name: str) -> None:
    """Regression: the read-only layout check built its URI without percent-encoding."""
    path = tmp_path / name / "store.sqlite3"
    with Store(path) as store:
        store.enqueue_detached("r1", SOURCE, {})
    with Store(path) as store:
        assert store.get("r1") is not None


@pytest.mark.timeout(60)
def test_threads_sharing_one_store_never_interleave_transactions(tmp_path: Path) -> None:
    """A worker's threads (engine, agent bridge, capture) share one connection."""
    import threading

    from pi_workflows.protocol.store import RunSource

    store = Store(tmp_path / "store.sqlite3")
    source = RunSource("w", "/w.workflow.py", "ab" * 32, "sha256:x")
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for i in range(100):
                store.enqueue_detached(f"t{n}-{i}", source, {})
                store.get(f"t{n}-{i}")
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    store.close()
    assert errors == [] and not any(t.is_alive() for t in threads)
