"""Waiting out a full runs directory: the host's gate and its probe.

Owns what the host does while the filesystem under the runs directory is
full (a worker exited ``WorkerExit.DISK_FULL``, or the host's own write to a
bundle failed with ``ENOSPC``/``EDQUOT``): it claims no new run meanwhile
(each would only fail to lay out its bundle), says so once and then at most
once a minute, probes the directory with a small write on a backoff (0.5 s,
doubling to 10 s), and reports when a probe succeeds, so the host frees the
runs parked blocked with ``disk_full`` (``release``). No crash budget is involved
anywhere. Imports ``protocol`` only; never the session, maint or cli wings.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path

from loguru import logger

from ...protocol.diskfull import DISK_FULL
from ...protocol.errors import TransitionRefused
from ...protocol.paths import ensure_private_dir
from ...protocol.states import QueueState
from ...protocol.store import Store
from ...protocol.throttle import Throttle, held_note

# A probe that fits proves a little room, not enough for a run: a bundle's
# first files are a few KiB, so ask for some margin above that.
PROBE_BYTES = 64 * 1024
FIRST_PROBE_S = 0.5
LAST_PROBE_S = 10.0


def probe_space(runs_dir: Path) -> bool:
    """Whether ``PROBE_BYTES`` can be written under ``runs_dir`` now (the file is removed)."""
    path = runs_dir / f".space-probe.{os.getpid()}"
    try:
        ensure_private_dir(runs_dir)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        try:
            view = memoryview(bytes(PROBE_BYTES))
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        return True
    except OSError:
        return False
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)


class DiskGate:
    """Closed while the runs directory is full; it opens once a probe write fits."""

    def __init__(self, runs_dir: Path, monotonic: Callable[[], float],
                 probe: Callable[[Path], bool] = probe_space) -> None:
        self.runs_dir = runs_dir
        self.monotonic = monotonic
        self.probe = probe
        self.full = False
        self.due = 0.0
        self._failures = 0
        self.warnings = Throttle(monotonic=monotonic)

    def trip(self, why: str) -> None:
        """The runs directory is full (``why`` says how it showed): close, probe later."""
        if not self.full:
            self._failures = 0
        self.full = True
        self._schedule()
        held = self.warnings.due("runs_disk_full")
        if held is not None:
            logger.warning("{}; no new run is started until a write fits (next try in"
                           " {:.1f} s){}", why, self.due - self.monotonic(), held_note(held))

    def _schedule(self) -> None:
        self.due = self.monotonic() + min(LAST_PROBE_S, FIRST_PROBE_S * 2 ** min(self._failures, 8))
        self._failures += 1

    def reopened(self) -> bool:
        """While closed: probe when due; True exactly once, when a probe write fits."""
        if not self.full or self.monotonic() < self.due:
            return False
        if not self.probe(self.runs_dir):
            self._schedule()
            return False
        self.full = False
        self._failures = 0
        logger.warning("the runs directory has space again; runs go on")
        return True

    def timeout(self, longest: float) -> float:
        """How long the host may wait before the next probe is due."""
        if not self.full:
            return longest
        return min(longest, max(0.0, self.due - self.monotonic()))

    def release(self, store: Store) -> int:
        """Unblock the runs parked with ``disk_full``, once a probe write shows space.

        Also at start-up and every sweep, so runs an earlier host (or a
        session) parked so go on too. Returns how many were freed.
        """
        parked = [r for r in store.list_runs(QueueState.PARKED, limit=100_000)
                  if r.error_code == DISK_FULL]
        if not parked:
            return 0
        if not self.probe(self.runs_dir):
            self.trip(f"{len(parked)} run(s) wait for space in {self.runs_dir}")
            return 0
        freed = 0
        for row in parked:
            try:
                store.unblock(row.run_id)
                freed += 1
            except TransitionRefused:
                continue  # resumed or cancelled meanwhile
        if freed:
            logger.info("{} run(s) parked for want of space go on", freed)
        return freed
