"""The durable store: the single coordination point of a project.

One SQLite file per project by default; a PostgreSQL database when
``store_url`` is set (``pg.py``, docs/store.md). ``Store`` combines the
operation mixins over either backend; ``open_store`` opens it from settings.
Only ``db.py`` imports sqlite3 and only ``pg.py`` psycopg. Must not import
worker/supervisor.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from ..clock import Clock, now_ms
from .base import intent_id_for
from .catchup import CatchUp, CatchUpOps
from .claims import ClaimOps
from .controllers import ControllerOps
from .db import Database, check_layout, sqlite_version
from .effects import EffectOps
from .feed import FeedOps
from .leasewatch import LeaseWatch, Monotonic
from .queue import QueueOps
from .queue_reads import QueueReads
from .records import (
    Claim,
    Effect,
    Gone,
    Notification,
    QueueRow,
    Renewal,
    RunEvent,
    RunnerRow,
    RunSource,
    TurnIntent,
)
from .retention import Chain, ChainMember, Hold, RetentionOps
from .runners import RunnerOps
from .schema import SCHEMA_ID

if TYPE_CHECKING:  # settings pull in pydantic; a worker does not need it
    from ..settingspec import SettingsLike

__all__ = [
    "SCHEMA_ID", "CatchUp", "Chain", "ChainMember", "Claim", "Effect", "Gone", "Hold",
    "Notification", "QueueRow", "Renewal", "RunEvent", "RunSource", "RunnerRow", "Store",
    "TurnIntent",
    "check_layout", "intent_id_for", "open_store", "sqlite_version", "store_present",
]


class Store(ControllerOps, QueueOps, ClaimOps, QueueReads, CatchUpOps, RunnerOps, FeedOps,
            EffectOps, RetentionOps):
    """All store operations over one connection (use one ``Store`` per thread)."""

    def __init__(self, path: Path, *, lease_ms: int = 30_000, busy_timeout_ms: int = 5_000,
                 synchronous: str = "NORMAL", clock: Clock = now_ms,
                 monotonic: Monotonic = time.monotonic, url: str | None = None) -> None:
        """``path`` is the SQLite file; with ``url`` (a PostgreSQL URL) it is unused."""
        if url:
            from .pg import PgDatabase  # psycopg only when a URL asks for it
            self._db = PgDatabase(url, busy_timeout_ms=busy_timeout_ms)
        else:
            self._db = Database(Path(path), busy_timeout_ms=busy_timeout_ms,
                                synchronous=synchronous)
        self.url = url or None
        self._clock = clock
        self._watch = LeaseWatch(monotonic)
        self._ctl_watch = LeaseWatch(monotonic)  # reconcile claims (controllers.workqueue)
        self.lease_ms = lease_ms
        self.path = Path(path)

    def close(self) -> None:
        self._db.close()

    def data_version(self) -> int:
        """Moves when another connection commits (``Database.data_version``)."""
        return self._db.data_version()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def store_present(settings: SettingsLike, store_file: Path) -> bool:
    """Whether the project has a store to read: a PostgreSQL URL is set (the database is
    asked when it is opened), or the SQLite file exists. Readers that must not create
    a store ask this first."""
    return bool(settings.store_url) or store_file.exists()


def open_store(settings: SettingsLike, store_file: Path, *, clock: Clock = now_ms,
               monotonic: Monotonic = time.monotonic) -> Store:
    return Store(store_file, lease_ms=settings.lease_ms, busy_timeout_ms=settings.busy_timeout_ms,
                 synchronous=settings.sqlite_synchronous, clock=clock, monotonic=monotonic,
                 url=settings.store_url)
