"""Process titles, so ``ps`` tells an operator what each process is doing.

setproctitle normally makes room for a long title by moving the process's
environment, which blanks ``/proc/<pid>/environ``, and with it the run
marker that orphan reaping relies on. ``SPT_NOENV`` keeps the environment
in place; titles are then limited to the length of the original command
line, which for our processes is long enough. Imports nothing from the package.
"""

from __future__ import annotations

import os


def set_title(text: str) -> None:
    os.environ.setdefault("SPT_NOENV", "1")  # read once, at setproctitle's first import
    try:
        import setproctitle
    except ImportError:  # a title is a convenience, never a requirement
        return
    setproctitle.setproctitle(text)
