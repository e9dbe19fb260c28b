"""Serving a host in the foreground: signals, the wakeup socket, and the wait.

Owns what ``pi-workflows host`` adds around ``Host.loop_once``: signal
handlers that only record (a wakeup pipe, read at the start of each pass: a
first TERM, INT or HUP drains, a second stops at once), the listening end
of the wakeup socket, backing off the whole pass while the store is busy or the runs
directory's disk is full, and
waiting for the next pass on both descriptors. Imports ``protocol`` and the
host wing's loop and listener; never ``session`` or ``cli``.
"""

from __future__ import annotations

import os
import select
import signal
import time
from collections.abc import Callable
from typing import Any

from loguru import logger

from ...protocol.diskfull import disk_full_line, is_disk_full
from ...protocol.errors import StoreTransientError
from ...protocol.retry import backoff_delays
from ...protocol.throttle import held_note
from .listener import Listener
from .loop import STORE_WARNINGS, Host, StartupReport

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class HostServer:
    def __init__(self, host: Host) -> None:
        self.host = host
        self._signal_r: int | None = None
        self._listener: Listener | None = None
        self._store_delay = backoff_delays(0.05, 2.0)
        self._store_failures = 0

    def _install_signals(self) -> None:
        r, w = os.pipe()
        os.set_blocking(r, False)
        os.set_blocking(w, False)
        self._signal_r = r
        signal.set_wakeup_fd(w, warn_on_full_buffer=False)
        for sig in (*STOP_SIGNALS, signal.SIGCHLD):
            signal.signal(sig, lambda *_: None)  # recorded by the wakeup fd; nothing else

    def _drain_signals(self) -> None:
        if self._signal_r is None:
            return
        try:
            data = os.read(self._signal_r, 512)
        except BlockingIOError:
            return
        for signum in data:
            if signum in STOP_SIGNALS:
                self.host.request_stop()  # a closed terminal (HUP) drains like Ctrl-C

    def _wait(self, timeout: float) -> None:
        fds: list[Any] = [fd for fd in (self._signal_r, self._listener) if fd is not None]
        fds += self.host.wake_fds()  # a forked worker's exit, reported by the zygote
        # The signal pipe is drained by the next pass, so peek without reading it.
        readable, _, _ = select.select(fds, [], [], timeout)
        if self._listener is not None and self._listener in readable:
            self._listener.drain()

    def serve(self, on_start: Callable[[StartupReport], None] | None = None) -> int:
        host = self.host
        self._install_signals()
        report = host.start()
        try:
            self._listener = Listener(host.paths.state_dir)
        except OSError as exc:
            logger.warning("no wakeup socket ({}); polling every {} s", exc,
                           host.settings.poll_interval_s)
        host.lock.mark_ready()
        if on_start is not None:
            on_start(report)
        try:
            while True:
                try:
                    self._drain_signals()
                    host.loop_once()
                    self._store_failures = 0
                except StoreTransientError as exc:
                    delay = self._store_delay(self._store_failures)
                    self._store_failures += 1
                    held = STORE_WARNINGS.due(exc.code)
                    if held is not None:
                        logger.warning("{}; backing off {:.2f} s{}", exc, delay,
                                       held_note(held))
                    time.sleep(delay)
                    continue
                except OSError as exc:
                    # A write to the runs directory the pass did not expect to
                    # fail: the host waits for space instead of dying of it.
                    if not is_disk_full(exc):
                        raise
                    host.disk.trip(disk_full_line(exc))
                    time.sleep(host.disk.timeout(host.settings.poll_interval_s))
                    continue
                if host.stopping and (not host.workers or host.quick):
                    break
                self._wait(host.next_timeout())
        finally:
            if self._listener is not None:
                self._listener.close()
            host.shutdown()
        return 0
