"""The only module that imports ``sqlite3``.

Owns: opening the store file with private modes, verifying the exact schema
layout, pragmas, ``BEGIN IMMEDIATE`` transactions, and translating SQLite
errors into transient/permanent store errors. Knows nothing about queue
semantics. Imports ``protocol.errors``, ``protocol.paths`` and ``.schema``.

The one upgrade: a file that is exactly ``pi-workflows.store.v1`` gets the
tables v2 adds (``schema.CONTROLLER_STATEMENTS``) and the v2 id in one
``BEGIN IMMEDIATE`` transaction on open; every other layout is refused with
the reset instruction, as before.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ..errors import (
    StoreError,
    StoreIncompatible,
    StorePermanentError,
    StoreTransientError,
    UsageError,
)
from ..paths import ensure_private_dir
from .backend import ConstraintViolation, Dialect
from .schema import (
    CONTROLLER_STATEMENTS,
    SCHEMA_ID,
    SCHEMA_STATEMENTS,
    V1_SCHEMA_ID,
    V1_STATEMENTS,
)

Row = dict[str, Any]

# Primary result codes (the low byte of an extended code) that a retry can fix.
_SQLITE_FULL = 13
_TRANSIENT_CODES = {
    5,  # SQLITE_BUSY
    6,  # SQLITE_LOCKED
    10,  # SQLITE_IOERR
    13,  # SQLITE_FULL (space may be freed)
    14,  # SQLITE_CANTOPEN (e.g. fd exhaustion)
    15,  # SQLITE_PROTOCOL (WAL lock race)
}


def classify(exc: BaseException) -> StoreError:
    """Map a sqlite3 error to a transient or permanent store error."""
    if isinstance(exc, StoreError):
        return exc
    code = getattr(exc, "sqlite_errorcode", None)
    text = str(exc)
    if isinstance(exc, sqlite3.IntegrityError):
        return ConstraintViolation(text)
    if (code is not None and (code & 0xFF) == _SQLITE_FULL) or "disk is full" in text:
        return StoreTransientError("the disk is full: free some space; the store recovers"
                                   f" by itself ({text})", code="disk_full")
    if code is not None and (code & 0xFF) in _TRANSIENT_CODES:
        return StoreTransientError(f"store busy: {text}")
    if code is None and isinstance(exc, sqlite3.OperationalError) and (
        "locked" in text or "busy" in text
    ):
        return StoreTransientError(f"store busy: {text}")
    return StorePermanentError(f"store error: {text}")


class Tx:
    """A thin, typed view of a connection inside one transaction (``backend.Tx``)."""

    dialect: Dialect = "sqlite"

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> int:
        """Run a write; return the number of rows it changed."""
        return self._conn.execute(sql, params).rowcount

    def insert(self, sql: str, params: Sequence[Any] | dict[str, Any] = (),
               key: str = "seq") -> int:
        """Run an INSERT; return the new rowid (``key`` is its alias in the table)."""
        rowid = self._conn.execute(sql, params).lastrowid
        return int(rowid or 0)

    def one(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> Row | None:
        row = self._conn.execute(sql, params).fetchone()
        return dict(row) if row is not None else None

    def all(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[Row]:
        return [dict(r) for r in self._conn.execute(sql, params).fetchall()]

    def scalar(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> Any:
        row = self._conn.execute(sql, params).fetchone()
        return None if row is None else row[0]


@functools.cache
def expected_layout() -> list[tuple[str, str, str]]:
    """The schema objects exactly as SQLite records them for a fresh store."""
    return _layout_of(SCHEMA_STATEMENTS)


@functools.cache
def v1_layout() -> list[tuple[str, str, str]]:
    """The objects of a ``pi-workflows.store.v1`` file: the one layout upgraded on open."""
    return _layout_of(V1_STATEMENTS)


def _layout_of(statements: Sequence[str]) -> list[tuple[str, str, str]]:
    conn = sqlite3.connect(":memory:")
    try:
        for statement in statements:
            conn.execute(statement)
        return [
            (str(t), str(n), str(s))
            for t, n, s in conn.execute(
                "SELECT type, name, sql FROM sqlite_master "
                "WHERE name NOT LIKE 'sqlite_%' AND sql IS NOT NULL ORDER BY type, name"
            )
        ]
    finally:
        conn.close()


def _sidecars(path: Path) -> list[Path]:
    """SQLite's ``-wal`` and ``-shm`` files that belong with ``path``, if present."""
    return [p for p in (path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm"))
            if p.exists()]


def _reset_instruction(path: Path, why: str) -> StoreIncompatible:
    moves = "; ".join(f"mv '{p}' '{path}.old{p.name[len(path.name):]}'"
                      for p in [path, *_sidecars(path)])
    return StoreIncompatible(
        f"the store {path} is incompatible with this version of pi-workflows ({why}); "
        f"move it aside (for example: {moves}) and run again; "
        "run bundles are kept and stay readable"
    )


def _orphan_wal(path: Path) -> StoreIncompatible:
    return StoreIncompatible(
        f"found {path}-wal but no store file {path}: it holds the last commits of a store "
        "that was moved or deleted without it, and a new store would discard them; "
        f"move it aside with that store (for example: mv '{path}-wal' '{path}.old-wal'"
        f" and mv '{path}-shm' '{path}.old-shm') and run again; run bundles are kept"
    )


def _read_layout(path: Path, *, immutable: bool = False
                 ) -> tuple[list[tuple[str, str, str]], str | None]:
    """Read the schema objects and schema id without writing anything.

    ``immutable`` also creates no ``-wal``/``-shm`` files: only for a store at
    rest (no such files), whose every page is in the main file.
    """
    # A percent-encoded URI: a path with '?', '#' or '%' must not be parsed as a query.
    uri = path.absolute().as_uri() + ("?immutable=1" if immutable else "?mode=ro")
    conn = sqlite3.connect(uri, uri=True, timeout=5.0)
    try:
        objects = [
            (str(t), str(n), str(s))
            for t, n, s in conn.execute(
                "SELECT type, name, sql FROM sqlite_master "
                "WHERE name NOT LIKE 'sqlite_%' AND sql IS NOT NULL ORDER BY type, name"
            )
        ]
        schema_id = None
        if any(n == "store_meta" for _, n, _ in objects):
            row = conn.execute("SELECT value FROM store_meta WHERE key = 'schema'").fetchone()
            schema_id = None if row is None else str(row[0])
        return objects, schema_id
    finally:
        conn.close()


def sqlite_version() -> str:
    """The SQLite library's version (for ``doctor``)."""
    return sqlite3.sqlite_version


def check_layout(path: Path) -> str | None:
    """Verify an existing store's layout without writing or creating anything.

    Raises what opening it would (``StoreIncompatible``, ``StoreError``);
    returns the schema id, or None for an empty file (the next opener lays
    it out). For ``doctor``, which must change nothing.
    """
    wal = path.with_name(path.name + "-wal")
    if not path.exists() and wal.exists() and wal.stat().st_size > 0:
        raise _orphan_wal(path)
    if not path.is_file():
        raise UsageError(f"the store file {path} is not a file", code="store_path_invalid")
    if path.stat().st_size == 0:
        return None
    if not _sidecars(path):
        # At rest: read it without leaving SQLite's -wal/-shm behind. A writer
        # that opened it meanwhile may make that read wrong: a mismatch is
        # read again the ordinary way before it is believed.
        with contextlib.suppress(sqlite3.DatabaseError):
            objects, schema_id = _read_layout(path, immutable=True)
            if schema_id == SCHEMA_ID and objects == expected_layout():
                return SCHEMA_ID
    try:
        objects, schema_id = _read_layout(path)
    except sqlite3.DatabaseError as exc:
        err = classify(exc)
        if isinstance(err, StoreTransientError):
            raise err from None
        raise _reset_instruction(path, f"not a readable SQLite store: {exc}") from None
    if not objects:
        return None
    if schema_id == V1_SCHEMA_ID and objects == v1_layout():
        return V1_SCHEMA_ID  # upgraded in place by the next open
    if schema_id == V1_SCHEMA_ID:
        raise _reset_instruction(path, "table layout differs from " + V1_SCHEMA_ID)
    if schema_id != SCHEMA_ID:
        raise _reset_instruction(path, f"schema {schema_id or 'unknown'}, need {SCHEMA_ID}")
    if objects != expected_layout():
        raise _reset_instruction(path, "table layout differs from " + SCHEMA_ID)
    return SCHEMA_ID


class Database:
    """One connection to the store file, used by one thread."""

    def __init__(
        self, path: Path, *, busy_timeout_ms: int = 5000, synchronous: str = "NORMAL"
    ) -> None:
        self.path = path
        self._busy_timeout_ms = busy_timeout_ms
        self._serial = threading.RLock()
        try:
            self._conn = self._open(synchronous)
        except sqlite3.Error as exc:
            raise classify(exc) from None

    def _open(self, synchronous: str) -> sqlite3.Connection:
        if self.path.is_dir():
            raise UsageError(f"the store file {self.path} is a directory; point"
                             " PI_WORKFLOWS_STORE_FILE at a file", code="store_path_invalid")
        ensure_private_dir(self.path.parent)
        wal = self.path.with_name(self.path.name + "-wal")
        if not self.path.exists() and wal.exists() and wal.stat().st_size > 0:
            raise _orphan_wal(self.path)
        fresh = upgrade = False
        try:
            fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
            os.close(fd)
            fresh = True
        except FileExistsError:
            pass
        if not fresh:
            upgrade = self._verify_existing()
        conn = sqlite3.connect(
            self.path, timeout=self._busy_timeout_ms / 1000, isolation_level=None,
            check_same_thread=False,
        )
        try:
            conn.row_factory = sqlite3.Row
            conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_ms)}")
            conn.execute("PRAGMA foreign_keys = ON")
            self._conn = conn
            if upgrade:
                self._upgrade_v1()
            else:
                self._create_if_empty()
            self._enable_wal(conn)
            conn.execute(f"PRAGMA synchronous = {synchronous}")
        except BaseException:
            conn.close()
            raise
        return conn

    def _enable_wal(self, conn: sqlite3.Connection) -> None:
        """Switch the file to WAL (persistent), waiting out other openers.

        The switch needs the file to itself and SQLite reports SQLITE_BUSY at
        once instead of calling the busy handler, so several processes opening
        a new store together would fail; retry within the busy timeout.
        """
        deadline = time.monotonic() + max(self._busy_timeout_ms, 1000) / 1000
        pause = 0.002
        while True:
            try:
                mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
                if str(mode).lower() != "wal":
                    mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            except sqlite3.OperationalError as exc:
                if isinstance(classify(exc), StoreTransientError) \
                        and time.monotonic() < deadline:
                    time.sleep(pause)
                    pause = min(pause * 2, 0.05)
                    continue
                raise
            if str(mode).lower() != "wal":
                raise StorePermanentError(f"store {self.path} could not switch to WAL (got {mode})")
            return

    def _verify_existing(self) -> bool:
        """Refuse any layout but ours; True for an exact v1 file (to upgrade)."""
        if self.path.stat().st_size == 0:
            return False  # created by a process that crashed before the schema; fill it in
        try:
            objects, schema_id = _read_layout(self.path)
        except sqlite3.DatabaseError as exc:
            raise _reset_instruction(self.path, f"not a readable SQLite store: {exc}") from None
        if not objects:
            return False
        if schema_id == V1_SCHEMA_ID and objects == v1_layout():
            return True
        if schema_id == V1_SCHEMA_ID:  # an earlier alpha's v1, or a hand-edited one
            raise _reset_instruction(self.path, "table layout differs from " + V1_SCHEMA_ID)
        if schema_id != SCHEMA_ID:
            found = schema_id or "unknown"
            raise _reset_instruction(self.path, f"schema {found}, need {SCHEMA_ID}")
        if objects != expected_layout():
            raise _reset_instruction(self.path, "table layout differs from " + SCHEMA_ID)
        return False

    def _upgrade_v1(self) -> None:
        """v1 -> v2 in place: add the controller tables and bump the id, in one
        write transaction that checks the layout again (another opener may have
        upgraded it meanwhile: then there is nothing to do). Additive only:
        no v1 row or object changes. A crash before COMMIT leaves v1."""
        with self.transaction() as tx:
            schema_id = tx.scalar("SELECT value FROM store_meta WHERE key = 'schema'")
            if schema_id == V1_SCHEMA_ID:
                objects = [(str(r["type"]), str(r["name"]), str(r["sql"])) for r in tx.all(
                    "SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'"
                    " AND sql IS NOT NULL ORDER BY type, name")]
                if objects != v1_layout():
                    raise _reset_instruction(self.path, "table layout differs from "
                                             + V1_SCHEMA_ID)
                for statement in CONTROLLER_STATEMENTS:
                    tx.execute(statement)
                if tx.execute("UPDATE store_meta SET value = ? WHERE key = 'schema'"
                              " AND value = ?", (SCHEMA_ID, V1_SCHEMA_ID)) != 1:
                    raise StorePermanentError(f"store {self.path}: the schema id changed"
                                              " during its upgrade")
        objects, schema_id = _read_layout(self.path)
        if schema_id != SCHEMA_ID or objects != expected_layout():
            raise _reset_instruction(self.path, "table layout differs from " + SCHEMA_ID)

    def _create_if_empty(self) -> None:
        # An existing store needs no write lock to open (it was verified
        # read-only), so opening never waits on a busy writer.
        with self.transaction(write=False) as tx:
            if tx.scalar("SELECT count(*) FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'"):
                return
        # The check and the DDL share one write transaction, so two processes
        # opening a new store at once cannot both create it.
        with self.transaction() as tx:
            count = tx.scalar("SELECT count(*) FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'")
            if count == 0:
                for statement in SCHEMA_STATEMENTS:
                    tx.execute(statement)
                tx.execute("INSERT INTO store_meta(key, value) VALUES ('schema', ?)", (SCHEMA_ID,))
        objects, schema_id = _read_layout(self.path)
        if schema_id != SCHEMA_ID or objects != expected_layout():
            raise _reset_instruction(self.path, "table layout differs from " + SCHEMA_ID)

    @contextlib.contextmanager
    def transaction(self, *, write: bool = True) -> Iterator[Tx]:
        """``BEGIN IMMEDIATE`` (or deferred for reads) ... COMMIT, or ROLLBACK on error.

        One transaction at a time per connection: a worker's threads (the
        engine, an agent's bridge and capture, warming Pi) share its store,
        and interleaved BEGIN/COMMIT on one connection would break both.
        """
        with self._serial:
            yield from self._transaction(write)

    def _transaction(self, write: bool) -> Iterator[Tx]:
        conn = self._conn
        try:
            conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        except sqlite3.Error as exc:
            self._rollback()
            raise classify(exc) from None
        try:
            yield Tx(conn)
        except sqlite3.Error as exc:
            self._rollback()
            raise classify(exc) from None
        except BaseException:
            self._rollback()
            raise
        try:
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            self._rollback()
            raise classify(exc) from None

    def _rollback(self) -> None:
        """End a failed transaction without hiding the error that failed it.

        SQLite rolls some failures back by itself (full disk, I/O error,
        interrupt); a second ROLLBACK would then raise a raw sqlite3 error in
        place of the classified one.
        """
        if self._conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                self._conn.execute("ROLLBACK")

    def data_version(self) -> int:
        """SQLite's ``PRAGMA data_version``: it moves whenever another connection commits
        (a viewer's cheap test of "did anything change", never a read of the tables)."""
        with self._serial:
            try:
                return int(self._conn.execute("PRAGMA data_version").fetchone()[0])
            except sqlite3.Error as exc:
                raise classify(exc) from None

    def close(self) -> None:
        with contextlib.suppress(sqlite3.Error):
            self._conn.close()
