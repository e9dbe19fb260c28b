"""The PostgreSQL store backend: the only module that imports ``psycopg``.

Owns connecting to ``PI_WORKFLOWS_STORE_URL``, laying out or verifying the
schema (``pgschema``), transactions with the semantics the mixins were
written for, and turning psycopg's errors into the store's transient and
permanent errors. Knows nothing about queue semantics. Imports
``protocol.errors``, ``.backend`` and ``.pgschema``; psycopg only when a
store URL is used, so the SQLite default never loads it.

Transactions. SQLite's ``BEGIN IMMEDIATE`` makes every write transaction
exclusive, and the mixins read, decide and write inside one. Here a write
transaction takes one transaction-scoped advisory lock, keyed by the
store's schema, before its first statement: the same single-writer order,
so every compare-and-set keeps its meaning, and readers never wait (MVCC).
A read transaction is ``REPEATABLE READ READ ONLY``: one snapshot, as a
SQLite read transaction sees. Waiting for the lock is bounded by the busy
timeout (``lock_timeout``) and then is a transient error, like SQLITE_BUSY.

Connection loss. A broken connection is closed and the error is transient;
the next transaction connects again. A COMMIT whose answer was lost is the
one case where the outcome is unknown: it is reported as transient with
that said, and every caller's write is a compare-and-set that a retry
finds already done or refuses (docs/store.md).
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Iterator, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from ..errors import (
    StoreError,
    StoreIncompatible,
    StorePermanentError,
    StoreTransientError,
    UsageError,
)
from ..settingspec import redact_store_url as redact_url
from .backend import ConstraintViolation, Dialect, Row
from .pgschema import DATA_VERSION_KEY, PG_SCHEMA_ID, expected_objects, pg_statements

if TYPE_CHECKING:
    import psycopg

EXTRA_HINT = "pip install 'pi-workflows[postgres]'"
# The first half of the advisory lock's key: ours, so other users of advisory
# locks in the same database do not collide with it; the second half is the schema.
_LOCK_CLASS = 0x5057  # "PW"
# SQLSTATE classes a retry can fix: connection exceptions, insufficient
# resources, operator intervention (admin shutdown, crash shutdown), and the
# transaction rollbacks (serialization failure, deadlock) and lock timeouts.
_TRANSIENT_CLASSES = ("08", "53", "57", "40")
_TRANSIENT_STATES = {"55P03"}  # lock_not_available: the busy timeout passed


def is_store_url(url: str) -> bool:
    return url.startswith(("postgresql://", "postgres://"))


def _import_psycopg() -> Any:
    try:
        import psycopg
    except ImportError:
        raise UsageError("PI_WORKFLOWS_STORE_URL names a PostgreSQL store, which needs"
                         f" psycopg 3: {EXTRA_HINT}", code="postgres_missing") from None
    return psycopg


@lru_cache(maxsize=2048)
def to_pg(sql: str) -> str:
    """The mixins' SQL as PostgreSQL and psycopg take it.

    ``?`` placeholders become ``%s`` and a literal ``%`` is doubled; SQLite's
    null-safe ``IS ?`` becomes ``IS NOT DISTINCT FROM %s`` (PostgreSQL's
    ``IS`` takes only NULL, TRUE, FALSE). A ``?`` inside a quoted literal
    stays itself; the mixins' SQL has none, but a wrong rewrite there would
    change a value silently.
    """
    out: list[str] = []
    quoted = False
    for ch in sql:
        if ch == "'":
            quoted = not quoted
            out.append(ch)
        elif ch == "%":
            out.append("%%")
        elif ch == "?" and not quoted:
            out.append("%s")
        else:
            out.append(ch)
    return _NULL_SAFE_NOT.sub(" IS DISTINCT FROM %s", _NULL_SAFE.sub(
        " IS NOT DISTINCT FROM %s", "".join(out)))


_NULL_SAFE = re.compile(r"\s+IS\s+%s", re.IGNORECASE)
_NULL_SAFE_NOT = re.compile(r"\s+IS\s+NOT\s+%s", re.IGNORECASE)


def classify(exc: BaseException, url: str = "") -> StoreError:
    """Map a psycopg error to a transient or permanent store error."""
    if isinstance(exc, StoreError):
        return exc
    psycopg = _import_psycopg()
    state = getattr(exc, "sqlstate", None) or ""
    text = _one_line(exc)
    where = f" ({redact_url(url)})" if url else ""
    if isinstance(exc, psycopg.errors.IntegrityError):
        return ConstraintViolation(_constraint_text(exc, text))
    if isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError) and not state:
        return StoreTransientError(f"the PostgreSQL store is unreachable{where}: {text}",
                                   code="store_unreachable")
    if state[:2] in _TRANSIENT_CLASSES or state in _TRANSIENT_STATES:
        return StoreTransientError(f"store busy or unreachable{where}: {text}")
    if state == "53100":  # disk_full
        return StoreTransientError(f"the PostgreSQL server's disk is full{where}: {text}",
                                   code="disk_full")
    return StorePermanentError(f"store error{where}: {text}")


_KEY_COLUMNS = re.compile(r"^Key \(([\w, ]+)\)=")


def _constraint_text(exc: BaseException, text: str) -> str:
    """The refusal with the constraint's columns, as SQLite names them (``table.column``):
    the mixins tell a duplicate run from a busy session by the column. The key's
    values (in the DETAIL line) are left out."""
    diag = getattr(exc, "diag", None)
    table = getattr(diag, "table_name", None) or ""
    match = _KEY_COLUMNS.match(getattr(diag, "message_detail", None) or "")
    if not match:
        return text
    columns = ", ".join(f"{table}.{c.strip()}" for c in match.group(1).split(","))
    return f"{text}: {columns}"


def _one_line(exc: BaseException) -> str:
    # psycopg's messages carry DETAIL/HINT lines and may quote a failing row:
    # the first line says what happened without the values.
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__


def check_pg_layout(url: str, *, busy_timeout_ms: int = 5000) -> str | None:
    """Verify a PostgreSQL store without creating or changing anything (``doctor``):
    its schema id, or None for an empty schema; raises what opening it would."""
    db = PgDatabase(url, busy_timeout_ms=busy_timeout_ms, create=False)
    try:
        return None if db.empty else PG_SCHEMA_ID
    finally:
        db.close()


class PgTx:
    """Statements inside one PostgreSQL transaction (``backend.Tx``)."""

    dialect: Dialect = "postgres"

    def __init__(self, conn: psycopg.Connection[Row]) -> None:
        self._conn = conn

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        return self._conn.execute(to_pg(sql), params).rowcount

    def insert(self, sql: str, params: Sequence[Any] = (), key: str = "seq") -> int:
        row = self._conn.execute(to_pg(sql) + f" RETURNING {key}", params).fetchone()
        return int(row[key]) if row is not None else 0

    def one(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        return self._conn.execute(to_pg(sql), params).fetchone()

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        return self._conn.execute(to_pg(sql), params).fetchall()

    def scalar(self, sql: str, params: Sequence[Any] = ()) -> Any:
        row = self._conn.execute(to_pg(sql), params).fetchone()
        return None if row is None else next(iter(row.values()))


class PgDatabase:
    """One connection to a PostgreSQL store, used by one thread at a time (``Backend``)."""

    def __init__(self, url: str, *, busy_timeout_ms: int = 5000,
                 connect_timeout_s: float = 5.0, create: bool = True) -> None:
        self.url = url
        self._psycopg = _import_psycopg()
        self._busy_timeout_ms = busy_timeout_ms
        self._connect_timeout_s = connect_timeout_s
        self._serial = threading.RLock()
        self._conn: psycopg.Connection[Row] | None = None
        self._lock_key = 0
        self.empty = False  # with create=False: the database holds no store yet
        with self._serial:
            self._connection()  # fail at open, as the SQLite store does, not at first use
            self._ensure_schema(create)

    # -- connecting ---------------------------------------------------------

    def _connection(self) -> psycopg.Connection[Row]:
        if self._conn is not None and not self._conn.closed:
            return self._conn
        self._conn = None
        pg = self._psycopg
        try:
            conn: psycopg.Connection[Row] = pg.connect(
                self.url, autocommit=True, row_factory=pg.rows.dict_row,
                connect_timeout=max(1, round(self._connect_timeout_s)),
                application_name="pi-workflows")
        except pg.Error as exc:
            raise classify(exc, self.url) from None
        try:
            # A wedged writer makes others wait at most the busy timeout, as
            # SQLite's busy handler does; 0 would mean "wait forever" here.
            timeout = max(int(self._busy_timeout_ms), 1)
            conn.execute(f"SET lock_timeout = {timeout}")
            conn.execute("SET idle_in_transaction_session_timeout = 600000")
            row = conn.execute("SELECT hashtext(current_schema()) AS k,"
                               " current_schema() AS s").fetchone()
            if row is None or row["s"] is None:
                raise StorePermanentError(
                    f"the PostgreSQL store {redact_url(self.url)} has no schema to use:"
                    " its search_path names none that exists")
            self._lock_key = int(row["k"])
        except pg.Error as exc:
            conn.close()
            raise classify(exc, self.url) from None
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        return conn

    def _drop_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    # -- the schema ---------------------------------------------------------

    def _objects(self, tx: PgTx) -> frozenset[tuple[str, str]]:
        tables = tx.all("SELECT tablename AS name FROM pg_tables"
                        " WHERE schemaname = current_schema()")
        # Indexes that back a PRIMARY KEY or UNIQUE constraint are PostgreSQL's own.
        indexes = tx.all(
            "SELECT indexname AS name FROM pg_indexes WHERE schemaname = current_schema()"
            " AND indexname NOT IN (SELECT conname FROM pg_constraint"
            " WHERE connamespace = current_schema()::regnamespace)")
        return frozenset({("table", str(r["name"])) for r in tables}
                         | {("index", str(r["name"])) for r in indexes})

    def _ensure_schema(self, create: bool) -> None:
        with self.transaction(write=False) as tx:
            objects = self._objects(tx)
            if objects:
                self._verify(tx, objects)
                return
        if not create:
            self.empty = True
            return
        # The check and the DDL share one write transaction (the writers'
        # lock), so two processes opening a new store cannot both create it.
        with self.transaction() as tx:
            objects = self._objects(tx)
            if objects:
                self._verify(tx, objects)
                return
            for statement in pg_statements():
                tx.execute(statement)
            tx.execute("INSERT INTO store_meta(key, value) VALUES ('schema', ?), (?, '0')",
                       (PG_SCHEMA_ID, DATA_VERSION_KEY))

    def _verify(self, tx: PgTx, objects: frozenset[tuple[str, str]]) -> None:
        schema_id = None
        if ("table", "store_meta") in objects:
            schema_id = tx.scalar("SELECT value FROM store_meta WHERE key = 'schema'")
        if schema_id != PG_SCHEMA_ID:
            raise self._reset_instruction(f"schema {schema_id or 'unknown'}, need {PG_SCHEMA_ID}")
        if objects != expected_objects():
            raise self._reset_instruction("table layout differs from " + PG_SCHEMA_ID)

    def _reset_instruction(self, why: str) -> StoreIncompatible:
        return StoreIncompatible(
            f"the PostgreSQL store {redact_url(self.url)} is incompatible with this version"
            f" of pi-workflows ({why}); point PI_WORKFLOWS_STORE_URL at an empty database"
            " or schema, or move this one aside (for example: ALTER SCHEMA ... RENAME TO"
            " ..._old, then CREATE SCHEMA with the old name) and run again")

    # -- transactions -------------------------------------------------------

    @contextlib.contextmanager
    def transaction(self, *, write: bool = True) -> Iterator[PgTx]:
        with self._serial:
            yield from self._transaction(write)

    def _transaction(self, write: bool) -> Iterator[PgTx]:
        psycopg = self._psycopg
        conn = self._connection()
        try:
            if write:
                conn.execute("BEGIN")
                conn.execute("SELECT pg_advisory_xact_lock(%s, %s)",
                             (_LOCK_CLASS, self._lock_key))
            else:
                conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        except psycopg.Error as exc:
            self._rollback(conn)
            raise classify(exc, self.url) from None
        try:
            yield PgTx(conn)
            if write:
                # The change counter the viewers watch (SQLite's data_version).
                conn.execute("UPDATE store_meta SET value = (value::bigint + 1)::text"
                             " WHERE key = %s", (DATA_VERSION_KEY,))
        except psycopg.Error as exc:
            self._rollback(conn)
            raise classify(exc, self.url) from None
        except BaseException:
            self._rollback(conn)
            raise
        try:
            conn.execute("COMMIT")
        except psycopg.Error as exc:
            err = classify(exc, self.url)
            self._rollback(conn)
            if isinstance(err, StoreTransientError) and conn.closed:
                raise StoreTransientError(
                    f"the connection to the store was lost during COMMIT, so whether it"
                    f" committed is unknown: {err}", code=err.code) from None
            raise err from None

    def _rollback(self, conn: psycopg.Connection[Row]) -> None:
        """End a failed transaction; a broken connection is dropped for a new one."""
        if conn.closed or conn.broken:
            self._drop_connection()
            return
        try:
            conn.execute("ROLLBACK")
        except Exception:
            self._drop_connection()

    def data_version(self) -> int:
        with self._serial:
            conn = self._connection()
            try:
                row = conn.execute("SELECT value FROM store_meta WHERE key = %s",
                                   (DATA_VERSION_KEY,)).fetchone()
            except self._psycopg.Error as exc:
                if conn.broken:
                    self._drop_connection()
                raise classify(exc, self.url) from None
            return 0 if row is None else int(row["value"])

    def close(self) -> None:
        with self._serial:
            self._drop_connection()
