"""Clocks for the tests: one that moves only when told to, and one a lease ahead of now.

Owns ``FakeClock`` (epoch milliseconds for a store or a host's lease clock,
or monotonic seconds for crash windows, watches and retries: whatever
``now`` starts as; ``sleep`` records the pause and moves it on) and
``LaterClock`` (real time plus an offset: a runner that looks after a dead
owner's lease ran out). Both are picklable, so a spawned child can take
one. Imports ``pi_workflows.protocol.clock`` only: never pytest, a conftest
or a test module.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from pi_workflows.protocol.clock import now_ms

N = TypeVar("N", int, float)

WALL_START_MS = 1_800_000_000_000  # a fixed epoch-ms instant (January 2027)


class FakeClock(Generic[N]):
    """A clock that reads ``now`` and moves only through ``advance`` or ``sleep``.

    ``FakeClock()`` is a wall clock in epoch milliseconds; ``FakeClock(1000.0)``
    a monotonic clock in seconds.
    """

    def __init__(self, now: N = WALL_START_MS) -> None:
        self.now: N = now
        self.sleeps: list[N] = []  # every pause ``sleep`` was asked for

    def __call__(self) -> N:
        return self.now

    def advance(self, by: N) -> None:
        self.now += by

    def sleep(self, seconds: N) -> None:
        """A ``time.sleep`` stand-in: records the pause and moves the clock by it."""
        self.sleeps.append(seconds)
        self.now += seconds


@dataclass(frozen=True)
class LaterClock:
    """Real time plus ``ahead_ms``: a runner that looks after a dead one's lease ran out."""

    ahead_ms: int

    def __call__(self) -> int:
        return now_ms() + self.ahead_ms
