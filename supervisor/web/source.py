"""What the dashboard reads: the view stream behind a small interface.

Owns ``Filters`` (the run list's query as the web takes it), the
``Source`` and ``Subscription`` protocols the handlers use, and
``StreamSource``, the adapter onto ``views.stream.ViewStream`` (read-only:
the stream never writes a bundle or the store). Tests hand the app a fake
``Source``. Imports ``protocol`` and ``views.stream``; never ``cli``,
``host``, ``session`` or another sibling.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from ...protocol.paths import Paths
from ...protocol.settingspec import SettingsLike
from ..views.stream import ListQuery, ViewStream

Doc = dict[str, Any]


@dataclass(frozen=True)
class Filters:
    state: str | None = None
    workflow: str | None = None
    text: str | None = None
    limit: int = 200

    def as_dict(self) -> dict[str, Any]:
        return {"state": self.state, "workflow": self.workflow, "text": self.text,
                "limit": self.limit}


class Subscription(Protocol):
    rev: int
    doc: Doc

    def next(self, timeout: float) -> Doc | None: ...

    def close(self) -> None: ...


class Source(Protocol):
    def list_doc(self, filters: Filters) -> Doc: ...

    def run_doc(self, run_id: str) -> Doc: ...

    def subscribe_list(self, filters: Filters) -> Subscription: ...

    def subscribe_run(self, run_id: str) -> Subscription: ...

    def controllers_doc(self) -> Doc: ...

    def subscribe_controllers(self) -> Subscription: ...


class StreamSource:
    """``Source`` over the project's view stream."""

    def __init__(self, settings: SettingsLike, paths: Paths) -> None:
        self.stream = ViewStream(settings, paths)

    @staticmethod
    def _query(filters: Filters) -> ListQuery:
        return ListQuery(state=filters.state, workflow=filters.workflow, text=filters.text,
                         limit=filters.limit).checked()

    def list_doc(self, filters: Filters) -> Doc:
        return dict(self.stream.list_doc(self._query(filters)))

    def run_doc(self, run_id: str) -> Doc:
        return dict(self.stream.run_doc(run_id))

    def subscribe_list(self, filters: Filters) -> Subscription:
        sub: Subscription = self.stream.subscribe_list(self._query(filters))
        return sub

    def subscribe_run(self, run_id: str) -> Subscription:
        sub: Subscription = self.stream.subscribe_run(run_id)
        return sub

    def controllers_doc(self) -> Doc:
        return dict(self.stream.controllers_doc())

    def subscribe_controllers(self) -> Subscription:
        sub: Subscription = self.stream.subscribe_controllers()
        return sub
