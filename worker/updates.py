"""One node attempt's progress updates on their way into the trace.

Owns ``AttemptUpdates``, the callable the engine hands a node as
``ctx.updates`` (``ctx.publish_update``), that a shell node's line reader
(``worker.lines``) and an agent's ``update`` call feed: each update is
normalized and bounded (``protocol.updates``), the same update as the last
recorded one is not recorded again, at most one is recorded per
``MIN_INTERVAL_S`` (the latest waits and is written when its time comes or
when the attempt ends, so the last progress is never lost), and at most
``MAX_UPDATES_PER_ATTEMPT`` are recorded. What was refused or dropped is
counted in one ``updates_dropped`` event at the end. Writes go through the
engine's fenced ``note``; a failing write stops the updates, never the node.
Imports ``protocol`` only.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from ..protocol.jsonenc import canonical_json
from ..protocol.limits import safe_error_message
from ..protocol.updates import (
    MAX_UPDATES_PER_ATTEMPT,
    MIN_INTERVAL_S,
    UpdateError,
    event_payload,
    normalize_update,
)

Note = Callable[[str, dict[str, Any]], None]


class Cancel(Protocol):
    def cancel(self) -> None: ...


Schedule = Callable[[float, Callable[[], None]], Cancel]


def _timer(delay: float, fn: Callable[[], None]) -> Cancel:
    timer = threading.Timer(delay, fn)
    timer.daemon = True
    timer.name = "pi-workflows-updates"
    timer.start()
    return timer


class AttemptUpdates:
    """``ctx.updates`` of one attempt: call it with an update; ``close`` when it ends."""

    def __init__(self, note: Note, *, monotonic: Callable[[], float] = time.monotonic,
                 schedule: Schedule = _timer, min_interval_s: float = MIN_INTERVAL_S,
                 max_count: int = MAX_UPDATES_PER_ATTEMPT) -> None:
        self._note = note
        self._monotonic = monotonic
        self._schedule = schedule
        self._interval = min_interval_s
        self._max = max(1, max_count)
        self._lock = threading.RLock()
        self._last: str | None = None  # canonical JSON of the last recorded update
        self._last_at: float | None = None
        self._pending: dict[str, Any] | None = None
        self._timer: Cancel | None = None
        self.recorded = 0
        self.refused = 0
        self.over_limit = 0
        self.first_error: str | None = None
        self.closed = False
        self.broken = False

    def __call__(self, data: Any) -> None:
        """``ctx.publish_update(data)``: raises ``UpdateError`` for a malformed update."""
        self.publish(normalize_update(data))

    def offer(self, data: Any, *, source: str = "update") -> str | None:
        """Publish what an author's function returned; a bad one is counted, not raised.

        Returns the reason it was refused, or None.
        """
        try:
            self.publish(normalize_update(data))
        except UpdateError as exc:
            self.refuse(f"{source}: {exc}")
            return str(exc)
        return None

    def refuse(self, reason: str) -> None:
        with self._lock:
            self.refused += 1
            if self.first_error is None:
                self.first_error = safe_error_message(reason)[:500]

    def publish(self, data: dict[str, Any]) -> None:
        """Record ``data`` (already normalized) now, later, or not at all (a repeat)."""
        with self._lock:
            if self.closed or self.broken:
                return
            text = canonical_json(data)
            if text == self._last:
                self._pending = None  # back to what is shown: nothing new to write
                return
            now = self._monotonic()
            if self._last_at is None or now - self._last_at >= self._interval:
                self._pending = None
                self._write(data, text, reserve=True)
                return
            self._pending = data
            if self._timer is None:
                self._timer = self._schedule(self._interval - (now - self._last_at), self._due)

    def _due(self) -> None:
        with self._lock:
            self._timer = None
            if self.closed or self._pending is None:
                return
            data, self._pending = self._pending, None
            self._write(data, canonical_json(data), reserve=True)

    def _write(self, data: dict[str, Any], text: str, *, reserve: bool) -> None:
        # One slot is kept for the attempt's last update: past the cap an update
        # waits (replaced by any later one) and ``close`` writes the latest.
        if self.recorded >= self._max - (1 if reserve else 0):
            if reserve:
                self.over_limit += 1
                self._pending = data
            return
        if not reserve and self.recorded == self._max - 1 and self.over_limit:
            self.over_limit -= 1  # the one waiting at the cap is written after all
        try:
            self._note("update_published", event_payload(data))
        except Exception:  # evidence only: a failing write stops the updates, not the node
            self.broken = True
            return
        self.recorded += 1
        self._last, self._last_at = text, self._monotonic()

    def flush(self) -> None:
        """Write the update still waiting now (the work is over: before its effect is)."""
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            if self._pending is not None and not self.broken and not self.closed:
                data, self._pending = self._pending, None
                self._write(data, canonical_json(data), reserve=False)

    def close(self) -> None:
        """The attempt ended: write the update still waiting, then what was dropped."""
        with self._lock:
            if self.closed:
                return
            self.flush()
            self.closed = True
            if (self.refused or self.over_limit) and not self.broken:
                payload: dict[str, Any] = {"refused": self.refused,
                                           "overLimit": self.over_limit}
                if self.first_error is not None:
                    payload["error"] = self.first_error
                try:
                    self._note("updates_dropped", payload)
                except Exception:
                    self.broken = True
