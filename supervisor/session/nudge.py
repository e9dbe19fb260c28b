"""Telling a run's worker to look at the store now (after a cancel request).

Owns finding the live worker of a run from its bundle's ``processes.json``
(pid plus start time: a recycled pid is never signalled) and sending it
``NUDGE_SIGNAL``. The signal carries no meaning of its own: the worker only
renews its lease early and reads the store's flags, so a stray signal is
harmless. Imports ``protocol`` only; never the worker.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from ...protocol.bundle import Bundle, BundleCorrupt
from ...protocol.liveness import is_same_process
from ...protocol.wire import NUDGE_SIGNAL


def nudge_worker(runs_dir: Path, run_id: str) -> int:
    """Signal every live worker the run's bundle names; how many were reached."""
    try:
        entries = Bundle(runs_dir, run_id).processes().get("processes", [])
    except (BundleCorrupt, OSError, ValueError):
        return 0  # no bundle yet (a starting run learns of the cancel at its fence)
    reached = 0
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, dict) or entry.get("role") != "worker":
            continue
        pid, started = entry.get("pid"), entry.get("startTime")
        if not isinstance(pid, int) or not isinstance(started, int | float):
            continue
        if is_same_process(pid, float(started)):
            with contextlib.suppress(OSError):  # it exited meanwhile
                os.kill(pid, NUDGE_SIGNAL)
                reached += 1
    return reached
