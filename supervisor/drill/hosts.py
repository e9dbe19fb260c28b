"""The drill's hosts: starting one, knowing it is ready, killing and draining it.

Owns the ``pi-workflows host`` children of a drill. A host is ready when the
host lock file names that very pid with ``ready`` (as scripts are told to
wait in docs/host.md); it is found again through the lock file, proven by
pid and process start time (``supervisor.host.background.find_host``). One lock
serialises the drill's own threads. Imports ``protocol`` and
``supervisor.host.background``; never the worker.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time
from dataclasses import dataclass, field

from ...protocol.spawn import Popen, TimeoutExpired
from ..host.background import find_host
from .scratch import Scratch

CONCURRENCY = "3"


@dataclass
class Hosts:
    scratch: Scratch
    procs: list[Popen[bytes]] = field(default_factory=list)
    started: int = 0
    lock: threading.RLock = field(default_factory=threading.RLock)
    # Hosts the drill killed or drained: any other host that exited did so by itself.
    stopped: set[int] = field(default_factory=set)

    def exited_by_themselves(self) -> list[tuple[int, int]]:
        """(pid, exit code) of every host that exited without the drill stopping it."""
        with self.lock:
            return [(p.pid, code) for p in self.procs
                    if (code := p.poll()) is not None and p.pid not in self.stopped]

    def current(self) -> Popen[bytes] | None:
        with self.lock:
            for proc in self.procs:
                if proc.poll() is None:
                    return proc
            return None

    def ensure(self, timeout: float = 60.0) -> Popen[bytes] | None:
        """A live, ready host of the drill's (started if there is none); None if one
        would not start (its log says why)."""
        with self.lock:
            proc = self.current()
            if proc is not None:
                return proc
            proc = self.scratch.spawn("host", "--concurrency", CONCURRENCY, log="host.log")
            self.procs.append(proc)
            self.started += 1
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and proc.poll() is None:
                if self._ready(proc.pid):
                    return proc
                time.sleep(0.02)
            return proc if proc.poll() is None else None

    def _ready(self, pid: int) -> bool:
        try:
            info = json.loads(self.scratch.paths.host_lock.read_text() or "{}")
        except (OSError, ValueError):
            return False
        return isinstance(info, dict) and info.get("pid") == pid and info.get("ready") is True

    def pid(self) -> int | None:
        """The project's live host, as its lock file proves it."""
        found = find_host(self.scratch.paths)
        return found.pid if found is not None else None

    def kill9(self) -> int | None:
        with self.lock:
            proc = self.current()
            if proc is None:
                return None
            self.stopped.add(proc.pid)
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            return proc.pid

    def drain(self, timeout: float = 20.0) -> tuple[int | None, int | None]:
        """SIGTERM (a drain) and wait: (pid, exit code; None if it had to be killed)."""
        with self.lock:
            proc = self.current()
            if proc is None:
                return None, None
            self.stopped.add(proc.pid)
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGTERM)
            try:
                return proc.pid, proc.wait(timeout)
            except TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                return proc.pid, None
