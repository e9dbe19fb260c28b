"""Saying a repeated warning once a while, with a count of the ones left unsaid.

Owns the pacing of warnings that a stuck condition repeats many times a
second (a full disk, a busy store): the first is said at once, then at most
one per interval per key, each with how many were held back. Imports
nothing from the package.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

EVERY_S = 60.0


class Throttle:
    def __init__(self, every_s: float = EVERY_S,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.every_s = every_s
        self.monotonic = monotonic
        self._lock = threading.Lock()
        self._said: dict[str, float] = {}
        self._held: dict[str, int] = {}

    def due(self, key: str) -> int | None:
        """None while ``key`` was said within the interval; else how many were held back."""
        now = self.monotonic()
        with self._lock:
            last = self._said.get(key)
            if last is not None and now - last < self.every_s:
                self._held[key] = self._held.get(key, 0) + 1
                return None
            self._said[key] = now
            return self._held.pop(key, 0)


def held_note(held: int) -> str:
    return f" ({held} more like it in the last minute)" if held else ""
