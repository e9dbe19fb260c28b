"""``host --ui``: the host keeps a ``pi-workflows ui`` child running beside it.

Owns ``Dashboard``: a thread that starts ``pi-workflows ui --port 0`` for the
host's project as a child process (``protocol.spawn``, with a death signal
so it never outlives the host), restarts it with a growing delay when it
exits on its own, and stops it (SIGTERM, then SIGKILL) when the host stops.
The child writes its URL, token included, to ``<stateDir>/ui-url`` (0600);
the host's log names that file and never the token. A child process rather
than a thread: a web server's crash, memory and GIL stay out of the host's
loop, and the host never imports the web wing. Imports ``protocol`` only;
never ``web``, ``cli`` or another sibling.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from pathlib import Path

from loguru import logger

from ...protocol.paths import UI_URL_NAME, Paths
from ...protocol.spawn import DEVNULL, Popen, TimeoutExpired, spawn

FIRST_DELAY_S, MAX_DELAY_S = 1.0, 60.0


def ui_argv(project: Path, url_file: Path, actions: bool = False) -> list[str]:
    return [sys.executable, "-m", "pi_workflows", "ui", "--port", "0", "--project",
            str(project), "--url-file", str(url_file), *(["--actions"] if actions else [])]


class Dashboard:
    def __init__(self, paths: Paths) -> None:
        self.paths = paths
        self.url_file = paths.state_dir / UI_URL_NAME
        self._stop = threading.Event()
        self._proc: Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._keep, name="host-ui", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _keep(self) -> None:
        delay = FIRST_DELAY_S
        while not self._stop.is_set():
            with self._lock:
                if self._stop.is_set():
                    return
                # Spawned from this long-lived thread: its death signal fires when the
                # host process (this thread) goes, kill -9 included.
                self._proc = spawn(ui_argv(self.paths.project, self.url_file),
                                   cwd=self.paths.project, stdout=DEVNULL,
                                   pdeathsig=signal.SIGTERM)
            logger.info("dashboard: pi-workflows ui pid {}; its URL (with the token) is in {}",
                        self._proc.pid, self.url_file)
            code = self._proc.wait()
            if self._stop.is_set():
                return
            logger.warning("dashboard: pi-workflows ui exited {}; restarting in {:.0f} s",
                           code, delay)
            if self._stop.wait(delay):
                return
            delay = min(delay * 2, MAX_DELAY_S)

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        with self._lock:
            proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            proc.wait()
