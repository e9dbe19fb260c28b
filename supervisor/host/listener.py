"""The host's end of the wakeup channel (``protocol.wakeup`` has the address and poke).

Owns the non-blocking datagram socket file the host selects on, and draining
it in bounded batches, so a flood of pokes cannot hold up a pass. Only the
host that holds the host lock binds it, so a socket file found there is a
dead host's and is replaced. Imports ``protocol`` only.
"""

from __future__ import annotations

import contextlib
import os
import socket
from pathlib import Path

from ...protocol.paths import ensure_private_dir
from ...protocol.wakeup import address

DRAIN_BATCH = 256


class Listener:
    def __init__(self, state_dir: Path) -> None:
        target = address(state_dir)
        if target is None:
            raise OSError(f"the state directory path {state_dir} is too long for a socket")
        folder = Path(target).parent
        # 0700 and ours, never through a link: only the owner reaches the socket.
        # Another user's (or a link) raises UnsafeDirectory, an OSError: the host polls.
        ensure_private_dir(folder)
        self.addr = target
        with contextlib.suppress(FileNotFoundError):
            os.unlink(target)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.setblocking(False)
        try:
            self.sock.bind(target)
        except OSError:
            self.sock.close()
            raise
        os.chmod(target, 0o600)

    def fileno(self) -> int:
        return self.sock.fileno()

    def drain(self, limit: int = DRAIN_BATCH) -> int:
        """Read at most ``limit`` pokes; any left wake the next wait at once."""
        count = 0
        while count < limit:
            try:
                self.sock.recv(64)
            except (BlockingIOError, InterruptedError):
                break
            count += 1
        return count

    def close(self) -> None:
        self.sock.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.addr)
