"""Lease progress as one observer sees it, on that observer's own monotonic clock.

Owns the rule that lets a runner take another runner's claim without proof
that the holder is gone: it must itself have watched the claim's
``(claim_token, lease_expires_at)`` stay unchanged for a whole lease of its
own monotonic time. The holder's wall clock (which wrote the lease) and the
observer's (which could step forward or back) never meet, so an NTP step or
a VM resume cannot make a live claim look expired. A process that has not
watched a claim yet knows nothing about it: its first sighting starts the
count. Pure bookkeeping: no sqlite3, no store, no clock of its own; no
dataclasses either.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import NamedTuple

Monotonic = Callable[[], float]


# A NamedTuple, not a dataclass: the store is on the read commands' fast path,
# which must not load dataclasses (see e2e/test_fastcli.py).
class Sighting(NamedTuple):
    """A claim as last seen, and the monotonic time it was first seen so."""

    token: str
    lease: int
    since: float


class LeaseWatch:
    """Per-run sightings of claims; ``stale`` once one stayed the same for a lease."""

    def __init__(self, monotonic: Monotonic) -> None:
        self._monotonic = monotonic
        self._seen: dict[str, Sighting] = {}

    def observe(self, run_id: str, token: str, lease: int) -> float:
        """Record a sighting; seconds the claim has gone without progress since.

        Any change counts as progress, a smaller lease too: the store never
        writes one (renewals only go up), so a change is a renewal or a new
        claim, whatever the wall clock did.
        """
        now = self._monotonic()
        seen = self._seen.get(run_id)
        if seen is None or (seen.token, seen.lease) != (token, lease):
            self._seen[run_id] = Sighting(token, lease, now)
            return 0.0
        return now - seen.since

    def stale(self, run_id: str, token: str, lease: int, lease_ms: int) -> bool:
        """True once this claim went a whole ``lease_ms`` without progress."""
        return self.observe(run_id, token, lease) * 1000 >= lease_ms

    def keep_only(self, run_ids: Iterable[str]) -> None:
        """Forget runs no longer claimed (so memory follows the claimed set)."""
        wanted = set(run_ids)
        for run_id in [r for r in self._seen if r not in wanted]:
            del self._seen[run_id]
