"""Subscriptions: a document, then a patch per change, each revision one more.

Owns ``ViewStream`` (a project's view: documents on request, subscriptions
to the run list or one run) and ``Subscription`` (the document at a
revision; ``next(timeout)`` waits for a change through ``watch.Watch``,
rebuilds, and returns the ops between the two as a patch, or None when
nothing moved). Each subscription opens its own read connection to the
store, only if the store file exists (a viewer never creates one), so
subscriptions in different threads never share one. Never writes.
Imports ``protocol`` and ``supervisor.views``.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ....protocol.errors import StoreError
from ....protocol.paths import Paths
from ....protocol.settingspec import SettingsLike
from ....protocol.store import Store, open_store
from .controllers import controllers_doc
from .detail import RunDetail
from .diff import diff
from .runs import ListQuery, list_doc, watched_paths
from .watch import COALESCE_S, Watch


class Subscription:
    def __init__(self, build: Callable[[], dict[str, Any]], paths: Callable[[], list[Path]],
                 store: Store | None, owned: Store | None) -> None:
        self._build = build
        self._store = store
        self._owned = owned
        self.rev = 0
        self.doc = build()
        self._watch = Watch(paths, self._version)

    def _version(self) -> int:
        if self._store is None:
            return 0
        try:
            return self._store.data_version()
        except StoreError:
            return -1  # a busy or damaged store: look again next time

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
        if self._owned is not None:
            self._owned.close()
            self._owned = None

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ViewStream:
    """What the viewers read of one project (``docs/view-stream.md``)."""

    def __init__(self, settings: SettingsLike, paths: Paths) -> None:
        self.settings, self.paths = settings, paths

    def _store(self) -> Store | None:
        if not self.paths.store_file.exists():
            return None
        return open_store(self.settings, self.paths.store_file)

    def list_doc(self, query: ListQuery) -> dict[str, Any]:
        store = self._store()
        try:
            return list_doc(store, self.paths.runs_dir, query.checked())
        finally:
            if store is not None:
                store.close()

    def controllers_doc(self) -> dict[str, Any]:
        with self.subscribe_controllers() as sub:
            doc: dict[str, Any] = sub.doc
            return doc

    def subscribe_controllers(self) -> Subscription:
        """Resources change only in the store: its data version is the whole watch."""
        store = self._store()
        try:
            return Subscription(lambda: controllers_doc(store), lambda: [], store, store)
        except BaseException:
            if store is not None:
                store.close()
            raise

    def run_doc(self, run_id: str) -> dict[str, Any]:
        with self.subscribe_run(run_id) as sub:
            doc: dict[str, Any] = sub.doc
            return doc

    def subscribe_list(self, query: ListQuery) -> Subscription:
        query = query.checked()
        store = self._store()
        runs_dir = self.paths.runs_dir

        watched: list[list[Path]] = [[runs_dir]]

        def build() -> dict[str, Any]:
            doc = list_doc(store, runs_dir, query)
            watched[0] = watched_paths(doc, runs_dir)  # once per build, not per look
            return doc

        try:
            return Subscription(build, lambda: watched[0], store, store)
        except BaseException:
            if store is not None:
                store.close()
            raise

    def subscribe_run(self, run_id: str) -> Subscription:
        from ....protocol.limits import validate_run_id
        validate_run_id(run_id)
        store = self._store()
        try:
            detail = RunDetail(store, self.paths.runs_dir, run_id)
            return Subscription(detail.doc, detail.watched_paths, store, store)
        except BaseException:
            if store is not None:
                with contextlib.suppress(Exception):
                    store.close()
            raise
