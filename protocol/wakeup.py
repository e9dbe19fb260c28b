"""The host's low-latency wakeup channel: its address, and the poke clients send.

``run --detach``, ``start``, ``answer`` and ``cancel`` poke the host so it
claims at once instead of at its next poll. The channel is a UNIX datagram
socket file inside the project's 0700 state directory, so only its owner can
reach it (an abstract socket would ignore file permissions and let any local
process take the name first). When that path is too long for a socket
address, the socket goes into a per-user 0700 directory under the temporary
directory instead, which the host uses only if it owns it and it is no
link; a client pokes only a socket it owns in a directory it owns that
nobody else may enter. A poke with no host listening, or refused, is
dropped silently: polling is the fallback. The host's end is
``supervisor.host.listener``. Imports nothing from the package.
"""

from __future__ import annotations

import hashlib
import os
import socket
import stat
import tempfile
from pathlib import Path

SOCKET_NAME = "host.wakeup"
# sun_path holds 108 bytes on Linux (104 on BSDs), the terminating NUL included.
MAX_SOCKET_PATH = 103


def short_dir() -> Path:
    """Where a socket goes when the state directory's path is too long for one."""
    return Path(tempfile.gettempdir()) / f"pi-workflows-{os.getuid()}"


def address(state_dir: Path) -> str | None:
    path = str(state_dir / SOCKET_NAME)
    if len(os.fsencode(path)) <= MAX_SOCKET_PATH:
        return path
    digest = hashlib.sha256(str(state_dir).encode()).hexdigest()[:24]
    short = str(short_dir() / f"{digest}.wakeup")
    return short if len(os.fsencode(short)) <= MAX_SOCKET_PATH else None


def poke(state_dir: Path) -> bool:
    """Wake the host if one listens; True if the datagram was sent."""
    target = address(state_dir)
    if target is None or not _ours(Path(target)):
        return False
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        # A full queue means the host has pokes to read already: never wait.
        sock.setblocking(False)
        try:
            sock.sendto(b"!", target)
            return True
        except OSError:
            return False


def _ours(target: Path) -> bool:
    """Whether the socket and its directory are this user's alone.

    A poke into a directory another user owns (they took the fallback name
    under the temporary directory first) would tell them each launch and
    cancel; the host refuses that directory, so nobody of ours listens there.
    Not poking is the same as no host listening: the host polls.
    """
    uid = os.getuid()
    try:
        folder = os.lstat(target.parent)
        sock = os.lstat(target)
    except OSError:
        return False  # no socket: no host listening
    return (stat.S_ISDIR(folder.st_mode) and folder.st_uid == uid
            and not folder.st_mode & 0o077
            and stat.S_ISSOCK(sock.st_mode) and sock.st_uid == uid)
