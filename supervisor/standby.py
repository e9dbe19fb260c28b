"""The standby worker: at most one booted worker waiting for the host's next claim.

Owns keeping it booted (never respawning in a tight loop), handing it a
claim, and dropping it at shutdown. Imports ``protocol.spawn``,
``protocol.store`` (``Claim``) and the supervisor's worker handles.
"""

from __future__ import annotations

import signal
from collections.abc import Callable

from ..protocol.spawn import TimeoutExpired
from ..protocol.store import Claim
from .workers import Proc, WorkerHandle, assign

RESPAWN_PAUSE_S = 1.0


class Standby:
    def __init__(self, spawn: Callable[[], Proc], *, monotonic: Callable[[], float],
                 enabled: bool = True) -> None:
        self._spawn = spawn
        self._monotonic = monotonic
        self.enabled = enabled
        self.proc: Proc | None = None
        self._not_before = 0.0

    def keep(self) -> None:
        if not self.enabled:
            return
        if self.proc is not None:
            if self.proc.poll() is None:
                return
            # It died while idle: do not respawn in a tight loop.
            self._not_before = self._monotonic() + RESPAWN_PAUSE_S
            self.proc = None
        if self._monotonic() >= self._not_before:
            self.proc = self._spawn()

    def take(self, claim: Claim) -> WorkerHandle | None:
        proc, self.proc = self.proc, None
        return None if proc is None else assign(proc, claim, self._monotonic())

    def drop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        proc.hand_off(b"")  # EOF: the standby exits without doing anything
        try:
            proc.wait(1)
        except TimeoutExpired:
            proc.send_group(signal.SIGKILL)
            proc.wait()
