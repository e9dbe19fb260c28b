"""The one wall clock used for leases and timestamps.

Lease times are compared across processes, so they are wall-clock epoch
milliseconds; in-process deadlines use ``time.monotonic`` instead. Tests
inject their own ``Clock``. Imports nothing from the package.
"""

from __future__ import annotations

import time
from collections.abc import Callable

Clock = Callable[[], int]


def now_ms() -> int:
    return time.time_ns() // 1_000_000
