"""Process titles, so ``ps`` tells an operator what each process is doing.

setproctitle normally makes room for a long title by moving the process's
environment, which blanks ``/proc/<pid>/environ``, and with it the run
marker that orphan reaping relies on. ``SPT_NOENV`` keeps the environment
in place; titles are then limited to the length of the original command
line, which for our processes is long enough. Imports nothing from the package.

Every title names the project by its key (``<directory name>-<hash12>``, the
last part of the state directory): two projects in directories of the same
name get different titles. The key comes right after the role, so a short
original command line cuts the counters, never the project.
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


def host_title(project_key: str, workers: int) -> str:
    return f"pi-workflows host {project_key} workers={workers}"


def worker_title(project_key: str, run: str, doing: str = "") -> str:
    """A worker's title: its project, its run and what it does."""
    return f"pi-workflows worker {project_key} {run}" + (f" {doing}" if doing else "")


def spare_title(project_key: str) -> str:
    """A worker the zygote forked ahead of time: booted, waiting for its run."""
    return f"pi-workflows worker {project_key} spare"


def zygote_title(project_key: str) -> str:
    """The host's fork server: it forks one worker per claimed run."""
    return f"pi-workflows zygote {project_key}"


def controller_title(project_key: str, slot: int, doing: str = "idle") -> str:
    """A controller worker's title: its slot and the controller/key it reconciles."""
    return f"pi-workflows controller {project_key} #{slot} {doing}"
