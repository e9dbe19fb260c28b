"""The one wall clock used for leases and timestamps.

Lease times are written for people and compared by nobody across
processes: a claim is judged by its token and by an observer's own
monotonic clock (``protocol.store.leasewatch``), so a step of this clock
either way (NTP, a VM resumed) voids or takes no live claim. In-process
deadlines use ``time.monotonic``. Tests inject their own ``Clock``.

The drill's ``clock_step`` fault steps this clock in every product
process: only when ``PI_WORKFLOWS_DRILL_CLOCK_OFFSET`` names a file is
its signed number of seconds added (libfaketime, the natural tool, breaks
``time.sleep`` on Python 3.11 when it leaves the monotonic clock alone;
see docs/drills.md). Without that variable ``now_ms`` is the plain wall
clock. Imports nothing from the package.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

Clock = Callable[[], int]

OFFSET_ENV = "PI_WORKFLOWS_DRILL_CLOCK_OFFSET"
_OFFSET_FILE = os.environ.get(OFFSET_ENV) or None
# The file is read again at most this often (monotonic seconds): a step shows
# within a few milliseconds, and a store call does not pay for a read each time.
_OFFSET_TTL_S = 0.005
_offset: tuple[float, int] = (-1.0, 0)  # (monotonic time read, offset ms)


def _drill_offset_ms(path: str) -> int:
    global _offset
    now = time.monotonic()
    read_at, offset = _offset
    if now - read_at >= _OFFSET_TTL_S:
        try:
            with open(path, "rb") as fh:
                offset = int(float(fh.read(64).strip() or b"0") * 1000)
        except (OSError, ValueError):
            offset = 0  # a drill between two writes of the file: no step
        _offset = (now, offset)
    return offset


def now_ms() -> int:
    wall = time.time_ns() // 1_000_000
    return wall if _OFFSET_FILE is None else wall + _drill_offset_ms(_OFFSET_FILE)
