"""Noticing that something a view shows may have changed, cheaply.

Owns ``Signature`` (the size, modification time and inode of a few files:
what changes when a bundle file is appended to, rewritten or removed) and
``Watch``, which waits until a signature or the store's ``data_version``
moves. A change after a quiet spell is reported at once (a viewer shows it
within one look); during a burst, at most one change per ``COALESCE_S`` is
reported, so a run writing fast costs one rebuild per window, not one per
write. Never reads a file's contents and never
writes. Imports ``protocol`` only.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path

COALESCE_S = 0.05  # changes this close together become one patch
POLL_S = 0.02  # between looks at the signatures (a stat each: microseconds)

Stat = tuple[int, int, int] | None


def _stat(path: Path) -> Stat:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns, st.st_ino)


def signature(paths: Iterable[Path]) -> tuple[Stat, ...]:
    return tuple(_stat(p) for p in paths)


class Watch:
    """Waits for a change among ``paths()`` (asked anew each look: the set can grow)
    and ``version()`` (the store's data version, or a constant without a store)."""

    def __init__(self, paths: Callable[[], list[Path]], version: Callable[[], int],
                 *, monotonic: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self._paths = paths
        self._version = version
        self._monotonic = monotonic
        self._sleep = sleep
        self._seen = self._look()
        self._reported = float("-inf")
        # The shortest time between two reports: the subscriber raises it when its
        # rebuild is slow, so a viewer of a busy project uses a bounded share of a core.
        self.gap = COALESCE_S

    def _look(self) -> tuple[object, ...]:
        paths = self._paths()
        return (tuple(paths), signature(paths), self._version())

    def changed(self) -> bool:
        """One look: has anything moved since the last look that said so?"""
        now = self._look()
        if now == self._seen:
            return False
        self._seen = now
        return True

    def wait(self, timeout: float) -> bool:
        """True once something changed, False at ``timeout``; never twice within
        ``gap`` (what lands meanwhile is taken with the second report)."""
        deadline = self._monotonic() + timeout
        while not self.changed():
            left = deadline - self._monotonic()
            if left <= 0:
                return False
            self._sleep(min(POLL_S, left))
        hold = self._reported + self.gap - self._monotonic()
        if hold > 0:  # in a burst: let the rest of the window land, then take it all
            self._sleep(hold)
            self._seen = self._look()
        self._reported = self._monotonic()
        return True
