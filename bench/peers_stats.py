"""The peer comparison's arithmetic: the interleaved schedule, spreads and ratios.

Pure functions over lists of numbers and names (no processes, no clock),
so they are unit-tested in ``tests/bench/test_peers.py``. Imports only the
standard library.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from itertools import zip_longest


def interleave(a: Sequence[str], b: Sequence[str]) -> list[str]:
    """``a[0], b[0], a[1], b[1], ...``: the two sides alternate (ABAB), the longer one's
    extra variants last."""
    out: list[str] = []
    for x, y in zip_longest(a, b):
        out.extend(v for v in (x, y) if v is not None)
    return out


def schedule(a: Sequence[str], b: Sequence[str], rounds: int) -> list[tuple[int, str]]:
    """``(round, variant)`` in the order to run them: every round runs every variant,
    alternating sides, so a load spike hits both sides rather than one."""
    order = interleave(a, b)
    return [(r, v) for r in range(rounds) for v in order]


def spread(values: Sequence[float]) -> tuple[float, float, float]:
    """(min, median, max) of the finite values; NaNs when there are none."""
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return (math.nan, math.nan, math.nan)
    return (min(finite), statistics.median(finite), max(finite))


def fmt_spread(values: Sequence[float], unit: str = "", digits: int = 2) -> str:
    lo, mid, hi = spread(values)
    if math.isnan(mid):
        return "no samples"
    u = f" {unit}" if unit else ""
    n = sum(1 for v in values if math.isfinite(v))
    return f"min {lo:.{digits}f}  median {mid:.{digits}f}  max {hi:.{digits}f}{u}  (n={n})"


def ratio(x: float, y: float) -> float:
    """``x / y``, NaN when either is missing or ``y`` is zero."""
    if not (math.isfinite(x) and math.isfinite(y)) or y == 0:
        return math.nan
    return x / y


def paired_ratios(x: dict[int, float], y: dict[int, float]) -> list[float]:
    """``x[r] / y[r]`` for every round ``r`` both have: figures measured next to each
    other, so a slow spell of the machine divides out."""
    return [v for r in sorted(x.keys() & y.keys()) if math.isfinite(v := ratio(x[r], y[r]))]


def median_ratio(x: Sequence[float], y: Sequence[float]) -> float:
    """The ratio of the medians."""
    return ratio(spread(x)[1], spread(y)[1])
