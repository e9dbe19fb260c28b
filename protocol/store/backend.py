"""The seam between the store's SQL and a database engine.

Owns the two protocols a store backend implements: ``Tx`` (statements
inside one transaction) and ``Backend`` (transactions, a change counter,
close). SQLite (``db.py``, the default) and PostgreSQL (``pg.py``) implement
them; the operation mixins see only these. The SQL the mixins write is the
common subset of both engines with ``?`` placeholders; the few statements
that cannot be written once branch on ``Tx.dialect``. Imports nothing of the
store and no database module; ``protocol.errors`` only.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, Literal, Protocol

from ..errors import StorePermanentError

Row = dict[str, Any]
Params = Sequence[Any]
Dialect = Literal["sqlite", "postgres"]


class ConstraintViolation(StorePermanentError):
    """A UNIQUE/CHECK/FOREIGN KEY constraint refused a write (either engine)."""

    code = "constraint"


class Tx(Protocol):
    """Statements inside one transaction of a backend."""

    dialect: Dialect

    def execute(self, sql: str, params: Params = ()) -> int:
        """Run a write; the number of rows it changed."""
        ...

    def insert(self, sql: str, params: Params = (), key: str = "seq") -> int:
        """Run a one-row INSERT; the new row's ``key`` (its generated id)."""
        ...

    def one(self, sql: str, params: Params = ()) -> Row | None: ...

    def all(self, sql: str, params: Params = ()) -> list[Row]: ...

    def scalar(self, sql: str, params: Params = ()) -> Any: ...


class Backend(Protocol):
    """One connection to a store, used by one thread at a time."""

    def transaction(self, *, write: bool = True) -> AbstractContextManager[Tx]:
        """A transaction: committed when the block ends, rolled back if it raises.

        A write transaction is exclusive among all writers of the store, as
        SQLite's ``BEGIN IMMEDIATE`` is: the mixins read, decide and write in
        one, and rely on no other writer deciding in between.
        """
        ...

    def data_version(self) -> int:
        """A number that moves when another connection has committed a change."""
        ...

    def close(self) -> None: ...
