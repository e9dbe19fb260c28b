"""Requests that reach a running engine from outside its loop.

Owns the thread-safe flags for park, cancel and pause. Signal handlers and
lease renewal set them; the engine reads them at node boundaries and while a
node runs (pause only at a boundary: the engine then returns, paused, and the
queue holds the run). Imports nothing from the package.
"""

from __future__ import annotations

import threading


class Control:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self.park_requested = False
        self.cancel_requested = False
        self.pause_requested = False

    def _set(self, name: str, value: bool) -> None:
        with self._changed:
            setattr(self, name, value)
            self._changed.notify_all()

    def request_park(self) -> None:
        self._set("park_requested", True)

    def request_cancel(self) -> None:
        self._set("cancel_requested", True)

    def request_pause(self) -> None:
        self._set("pause_requested", True)

    def request_unpause(self) -> None:
        self._set("pause_requested", False)

    def wait(self, timeout: float) -> None:
        """Sleep up to ``timeout`` seconds, waking early on any request."""
        with self._changed:
            self._changed.wait(timeout)
