"""Times for people: ``2 min ago``, ``12.3 s``, and durations typed on the command line.

Owns the readable forms the human views print (JSON keeps epoch
milliseconds) and parsing ``30m``/``2h``/``7d`` options such as
``list --since``. Pure functions over numbers and text; imports
``protocol.errors`` only.
"""

from __future__ import annotations

import re

from ...protocol.errors import UsageError

_UNITS_S: dict[str, int] = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 7 * 86_400}
# ASCII digits only: str.isdigit-style matching would take other scripts' digits.
_DURATION_RE = re.compile(r"([0-9]+(?:\.[0-9]+)?)([smhdw])")
MAX_DURATION_S = 1000 * 365 * 86_400  # beyond any retention or look-back anyone means


def duration(ms: int | float) -> str:
    """``850 ms``, ``12.3 s``, ``4 min 05 s``, ``2 h 07 min``, ``3 d 4 h``."""
    ms = max(0, ms)
    if ms < 1000:
        return f"{int(ms)} ms"
    seconds = ms / 1000
    if seconds < 60:
        return f"{seconds:.1f} s"
    whole = int(seconds)
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    if whole < 86_400:
        return f"{whole // 3600} h {whole % 3600 // 60:02d} min"
    return f"{whole // 86_400} d {whole % 86_400 // 3600} h"


def ago(then_ms: int, now_ms: int) -> str:
    """How long before ``now_ms`` ``then_ms`` was, in the largest whole unit."""
    seconds = (now_ms - then_ms) // 1000
    if seconds < 10:
        return "just now"  # also another machine's clock a little ahead
    if seconds < 60:
        return f"{seconds} s ago"
    if seconds < 3600:
        return f"{seconds // 60} min ago"
    if seconds < 86_400:
        return f"{seconds // 3600} h ago"
    return f"{seconds // 86_400} d ago"


def parse_duration(text: str, option: str = "the duration") -> float:
    """Seconds in ``text``: numbers with a lower-case unit each (s, m, h, d, w): ``1h30m``."""
    cleaned = text.strip().replace(" ", "")
    parts = _DURATION_RE.findall(cleaned)
    if not cleaned or "".join(n + u for n, u in parts) != cleaned:
        # Upper case is refused, not folded: 2M would read as two months.
        case = "; units are lower case" if cleaned.lower() != cleaned else ""
        raise UsageError(f"{option} {text!r} is not a duration: use a number and a unit"
                         f" (s, m, h, d, w), such as 30m, 2h or 7d{case}",
                         code="invalid_duration")
    seconds = sum(float(number) * _UNITS_S[unit] for number, unit in parts)
    if seconds > MAX_DURATION_S:
        raise UsageError(f"{option} {text[:40]!r} is longer than 1000 years",
                         code="invalid_duration")
    return seconds
