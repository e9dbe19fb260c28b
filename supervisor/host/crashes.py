"""The host's crash budget: how often one run's worker may crash before the run fails.

Owns counting crashes per run within a sliding window on the monotonic
clock (a test's fake one, in unit tests), and forgetting a run's count once
its worker exited cleanly. Imports nothing from the package.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable


class CrashBudget:
    def __init__(self, limit: int, window_s: float, monotonic: Callable[[], float]) -> None:
        self.limit = limit
        self.window_s = window_s
        self._monotonic = monotonic
        self._crashes: dict[str, deque[float]] = {}

    def record(self, run_id: str) -> int:
        """Count a crash now; how many of this run's fall within the window."""
        now = self._monotonic()
        crashes = self._crashes.setdefault(run_id, deque())
        crashes.append(now)
        while crashes and now - crashes[0] > self.window_s:
            crashes.popleft()
        return len(crashes)

    def spent(self, count: int) -> bool:
        return count >= self.limit

    def forget(self, run_id: str) -> None:
        self._crashes.pop(run_id, None)

    def count(self, run_id: str) -> int:
        return len(self._crashes.get(run_id, ()))

    def __contains__(self, run_id: str) -> bool:
        return run_id in self._crashes
