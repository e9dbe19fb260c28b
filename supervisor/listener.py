"""The host's end of the wakeup channel (``protocol.wakeup`` has the address and poke).

Owns the non-blocking datagram socket the host selects on and drains each
pass. Imports ``protocol.wakeup`` only.
"""

from __future__ import annotations

import contextlib
import socket
from pathlib import Path

from ..protocol.wakeup import address


class Listener:
    def __init__(self, state_dir: Path) -> None:
        self.addr = address(state_dir)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.setblocking(False)
        if isinstance(self.addr, str):
            with contextlib.suppress(FileNotFoundError):
                Path(self.addr).unlink()
        self.sock.bind(self.addr)

    def fileno(self) -> int:
        return self.sock.fileno()

    def drain(self) -> int:
        count = 0
        while True:
            try:
                self.sock.recv(64)
                count += 1
            except (BlockingIOError, InterruptedError):
                return count

    def close(self) -> None:
        self.sock.close()
        if isinstance(self.addr, str):
            with contextlib.suppress(FileNotFoundError):
                Path(self.addr).unlink()
