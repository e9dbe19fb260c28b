"""The host's low-latency wakeup channel: its address, and the poke clients send.

``run --detach``, ``start``, ``activate`` and ``cancel`` poke the host so it
claims at once instead of at its next poll. On Linux this is an abstract
UNIX datagram socket named after the state directory (no file, no path
length limit); elsewhere a socket file in the state directory. A poke with
no host listening is silently dropped: polling is the fallback. The host's
end is ``supervisor.listener``. Imports nothing from the package.
"""

from __future__ import annotations

import hashlib
import socket
import sys
from pathlib import Path


def address(state_dir: Path) -> str | bytes:
    if sys.platform.startswith("linux"):
        digest = hashlib.sha256(str(state_dir).encode()).hexdigest()[:24]
        return b"\0pi-workflows-" + digest.encode()
    return str(state_dir / "host.wakeup")


def poke(state_dir: Path) -> bool:
    """Wake the host if one listens; True if the datagram was sent."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        try:
            sock.sendto(b"!", address(state_dir))
            return True
        except OSError:
            return False
