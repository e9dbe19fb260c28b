"""Recognising a full filesystem in an ``OSError``, and saying so in one line.

Owns the one decision every process makes when a write to the runs directory
fails: is this "the disk is full" (``ENOSPC``, or ``EDQUOT``, a quota that
is full), which frees itself once someone deletes files, and so is waited
out, never counted as a crash? ``EROFS`` is deliberately not one: a
filesystem remounted read-only after errors needs a person (and often a
fsck), so it stays an ordinary error that the crash budget ends. Also the
stable error code and the line said about it. Imports nothing from the
package.
"""

from __future__ import annotations

import errno

DISK_FULL = "disk_full"
FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


def is_disk_full(exc: BaseException) -> bool:
    """True for an ``OSError`` that says the filesystem (or the user's quota) is full."""
    return isinstance(exc, OSError) and exc.errno in FULL_ERRNOS


def disk_full_line(exc: OSError) -> str:
    """One line naming what could not be written and that space must be freed."""
    where = f" writing {exc.filename}" if exc.filename else ""
    return (f"the runs directory's filesystem is full ({exc.strerror or 'no space'}{where});"
            " free some space")
