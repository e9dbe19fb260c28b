"""Subscriptions: a document, then a patch per change, each revision one more.

Owns ``ViewStream`` (a project's view: documents on request, subscriptions
to the run list or one run) and ``Subscription`` (the document at a
revision; ``next(timeout)`` waits for a change through ``watch.Watch``,
rebuilds, and returns the ops between the two as a patch, or None when
nothing moved). Each subscription opens its own read connection to the
store, only once the store file exists (a viewer never creates one; a
project whose first run comes while it is shown is seen when its store
appears), so subscriptions in different threads never share one. Never writes.
Imports ``protocol`` and ``supervisor.views``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ....protocol.errors import StoreError
from ....protocol.limits import validate_run_id
from ....protocol.paths import Paths
from ....protocol.settingspec import SettingsLike
from ....protocol.store import Store, open_store, store_present
from .controllers import controllers_doc
from .detail import RunDetail
from .diff import diff
from .runs import ListQuery, list_doc, watched_paths
from .watch import COALESCE_S, Watch


class LazyStore:
    """A subscription's own store connection, opened once the file exists."""

    def __init__(self, settings: SettingsLike, path: Path) -> None:
        self._settings, self.path = settings, path
        self._store: Store | None = None

    def get(self) -> Store | None:
        if self._store is None and store_present(self._settings, self.path):
            self._store = open_store(self._settings, self.path)
        return self._store

    def version(self) -> int:
        store = self.get()
        if store is None:
            return 0
        try:
            return store.data_version()
        except StoreError:
            return -1  # a busy or damaged store: look again next time

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None


class Subscription:
    def __init__(self, build: Callable[[], dict[str, Any]], paths: Callable[[], list[Path]],
                 store: LazyStore | None = None) -> None:
        self._build = build
        self._store = store
        self.rev = 0
        try:
            self.doc = build()
            self._watch = Watch(paths, store.version if store is not None else lambda: 0)
        except BaseException:
            self.close()
            raise

    def next(self, timeout: float) -> dict[str, Any] | None:
        """The next patch ``{"rev", "ops"}``, or None when nothing changed in ``timeout``."""
        if not self._watch.wait(timeout):
            return None
        began = time.monotonic()
        new = self._build()
        # Rebuilding at most a third of the time: a slow build spaces the next one out.
        self._watch.gap = max(COALESCE_S, 2 * (time.monotonic() - began))
        # `at` moves on every build: a patch is only worth sending when more than it did.
        ops = [op for op in diff(self.doc, new) if op["path"] != ["at"]]
        if not ops:
            return None
        ops.append({"op": "set", "path": ["at"], "value": new["at"]})
        self.doc = new
        self.rev += 1
        return {"rev": self.rev, "ops": ops}

    def close(self) -> None:
        if self._store is not None:
            self._store.close()

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ViewStream:
    """What the viewers read of one project (``docs/view-stream.md``)."""

    def __init__(self, settings: SettingsLike, paths: Paths) -> None:
        self.settings, self.paths = settings, paths

    def _lazy(self) -> LazyStore:
        return LazyStore(self.settings, self.paths.store_file)

    def list_doc(self, query: ListQuery) -> dict[str, Any]:
        with self.subscribe_list(query) as sub:
            doc: dict[str, Any] = sub.doc
            return doc

    def controllers_doc(self) -> dict[str, Any]:
        with self.subscribe_controllers() as sub:
            doc: dict[str, Any] = sub.doc
            return doc

    def run_doc(self, run_id: str) -> dict[str, Any]:
        with self.subscribe_run(run_id) as sub:
            doc: dict[str, Any] = sub.doc
            return doc

    def subscribe_controllers(self) -> Subscription:
        """Resources change only in the store: the store file and its data version."""
        lazy = self._lazy()
        return Subscription(lambda: controllers_doc(lazy.get()), lambda: [lazy.path], lazy)

    def subscribe_list(self, query: ListQuery) -> Subscription:
        query = query.checked()
        lazy = self._lazy()
        runs_dir = self.paths.runs_dir
        watched: list[list[Path]] = [[runs_dir, lazy.path]]

        def build() -> dict[str, Any]:
            doc = list_doc(lazy.get(), runs_dir, query)
            watched[0] = [lazy.path, *watched_paths(doc, runs_dir)]  # once per build
            return doc

        return Subscription(build, lambda: watched[0], lazy)

    def subscribe_run(self, run_id: str) -> Subscription:
        validate_run_id(run_id)
        lazy = self._lazy()
        try:
            detail = RunDetail(lazy.get(), self.paths.runs_dir, run_id)
        except BaseException:
            lazy.close()
            raise
        return Subscription(detail.doc, detail.watched_paths, lazy)
