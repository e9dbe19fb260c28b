"""The stdin lifeline of a session runner started with ``--park-on-eof``.

Owns ``stdin_lifeline``: a daemon thread that calls back once standard
input reaches end of file, which is how ``activate --park-on-eof`` and
``resume RUN --session S --park-on-eof`` (the Pi extension's session
runners) park their run when the parent that holds the pipe's other end
dies, even by ``kill -9``. Typer-free, so the fast command line
(``supervisor.cli.main``) starts ``activate`` with it. Imports the standard
library only.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable


def stdin_lifeline(stop: Callable[[], None], fd: int = 0) -> None:
    """Call ``stop`` (from a daemon thread) once ``fd`` (standard input) reaches end of file.

    The pipe's other end is the parent's (the Pi extension's): when the
    parent exits, however it exits, the kernel closes it.
    """
    def watch() -> None:
        with contextlib.suppress(OSError):
            while os.read(fd, 4096):
                pass
        stop()

    threading.Thread(target=watch, name="stdin-lifeline", daemon=True).start()
