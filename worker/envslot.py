"""The run marker's bytes in a process's own environment block, rewritten in place.

Owns ``EnvSlot``: a forked child cannot change what ``/proc/PID/environ``
shows through ``os.environ`` (putenv points elsewhere), yet orphan reaping
reads its run from there; so the zygote is started with a padded marker as
its environment block's last entry, and each child overwrites those bytes.
Imports ``protocol.wire`` only; must not import the rest of the worker.
"""

from __future__ import annotations

import ctypes
import os

from ..protocol.wire import MARKER_ENV


class EnvSlot:
    """The marker's bytes in the environment block that ``/proc/PID/environ`` shows.

    ``os.environ`` changes do not reach that block (putenv points elsewhere),
    so a forked worker overwrites the zygote's padded value in place; the
    marker is the block's last entry, so the NUL padding ends the listing.
    """

    def __init__(self) -> None:
        libc = ctypes.CDLL(None)
        libc.getenv.restype = ctypes.c_void_p
        libc.getenv.argtypes = [ctypes.c_char_p]
        addr = libc.getenv(MARKER_ENV.encode())
        value = os.environb.get(MARKER_ENV.encode(), b"")
        self.addr: int | None = addr if addr and _in_env_block(addr, len(value)) else None
        self.room = len(value)

    def write(self, marker: str) -> bool:
        data = marker.encode()
        os.environ[MARKER_ENV] = marker  # what the worker's own children inherit
        if self.addr is None or len(data) > self.room:
            return False
        ctypes.memmove(self.addr, data + b"\0" * (self.room - len(data)), self.room)
        return True


def _in_env_block(addr: int, size: int) -> bool:
    try:
        with open("/proc/self/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
    except OSError:
        return False
    # Fields 50 and 51 of stat(5) (env_start, env_end); the list starts at field 3.
    start, end = int(fields[47]), int(fields[48])
    return start <= addr and addr + size <= end
