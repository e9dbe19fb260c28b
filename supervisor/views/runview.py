"""How a run is shown while it is followed: the view protocol and choosing a view.

Owns ``RunView`` (what ``run``, ``watch``, ``activate`` and ``resume
--here`` feed: their own messages, the run's growing trace and captures,
a tick between polls, and the end), the plain view (one line per event,
what scripts and tests read), the JSON-lines view of ``watch --json``, and
``terminal_view``, which picks the live view (``supervisor.views.live``, rich)
only when standard output is a terminal. rich is imported only then, so
the CLI starts fast. Imports ``protocol`` and ``supervisor.views.follower``.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol

from ...protocol.jsonenc import compact_json
from ...protocol.store import QueueRow
from .follower import TraceFollower, plain_line, taken_up

Echo = Callable[[str], None]
PLAIN_ENV = "PI_WORKFLOWS_PLAIN"  # set (to anything but "" or 0): plain lines on a terminal too


class RunView(Protocol):
    def say(self, line: str) -> None:
        """A message of the command itself (not a trace event)."""

    def show(self, follower: TraceFollower) -> None:
        """Take what the run wrote since the last call; called between polls."""

    def end(self, follower: TraceFollower, row: QueueRow | None, *,
            answered: bool = False) -> None:
        """The run stopped being shown here (settled, parked or given back); ``answered``:
        its checkpoint already has a continuation, so it is not to be answered."""

    def close(self) -> None: ...


class PlainView:
    """One line per trace event and captured agent event; shell output is left out."""

    def __init__(self, echo: Echo) -> None:
        self.echo = echo
        self.fork_start = False  # the next resume boundary is a fork being taken up

    def say(self, line: str) -> None:
        self.echo(line)

    def show(self, follower: TraceFollower) -> None:
        for item in follower.items():
            line = plain_line(item)
            kind, record = item
            if kind == "trace" and record.get("type") == "run_started":
                self.fork_start = bool((record.get("payload") or {}).get("forkedFrom"))
            elif kind == "trace" and record.get("type") == "run_resumed" and self.fork_start \
                    and (record.get("payload") or {}).get("boundary"):
                self.fork_start = False
                line = taken_up(record)
            if line is not None:
                self.echo(line)

    def end(self, follower: TraceFollower, row: QueueRow | None, *,
            answered: bool = False) -> None:
        return None

    def close(self) -> None:
        return None


class JsonLinesView:
    """``watch --json``: each trace event as it is in ``trace.ndjson``, one per line."""

    def __init__(self, out: Echo, err: Echo) -> None:
        self.out, self.err = out, err

    def say(self, line: str) -> None:
        self.err(line)

    def show(self, follower: TraceFollower) -> None:
        for kind, record in follower.items():
            if kind == "trace":
                self.out(compact_json(record))

    def end(self, follower: TraceFollower, row: QueueRow | None, *,
            answered: bool = False) -> None:
        return None

    def close(self) -> None:
        return None


def live_terminal() -> bool:
    """Whether standard output is a terminal that can take the live view."""
    if os.environ.get(PLAIN_ENV, "") not in ("", "0"):
        return False
    if os.environ.get("TERM", "") in ("dumb", "unknown"):
        return False
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):  # replaced or closed
        return False


@contextlib.contextmanager
def terminal_view(echo: Echo, *, project: Path, quiet: bool = False) -> Iterator[RunView]:
    """The view for a command that shows a run: live on a terminal, else plain lines."""
    view: RunView
    if quiet:
        view = PlainView(lambda line: None)
    elif live_terminal():
        from .live import LiveView

        view = LiveView(project=project)
    else:
        view = PlainView(echo)
    try:
        yield view
    finally:
        view.close()


def as_view(echo: Echo | None, view: RunView | None) -> RunView:
    if view is not None:
        return view
    return PlainView(echo if echo is not None else (lambda line: None))
