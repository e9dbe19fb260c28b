"""``parse_line``: a shell node's output lines turned into progress updates.

Owns ``LineUpdates`` (what ``shell(..., updates=parse_line(fn))`` holds)
and its constructor. The worker feeds each complete output line of the
chosen streams to ``fn(line)`` (``worker.lines``); what it returns, when not
None, is one update (``protocol.updates``). A leaf of the definition
modules: ``graph`` imports it. Imports nothing from the package.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

STREAMS = ("stdout", "stderr")


@dataclass(frozen=True)
class LineUpdates:
    """Which streams' lines go to ``fn``; ``fn(line) -> update | None``."""

    fn: Callable[[str], Any]
    streams: Any = ("stdout",)  # a tuple of stream names once valid (``validate`` checks)


def parse_line(fn: Callable[[str], Any], *,
               streams: Sequence[str] = ("stdout",)) -> LineUpdates:
    """Updates from a shell node's output: ``fn(line)`` for each complete line.

    ``line`` is one line of text without its newline (and without a ``\\r``
    before it). ``fn`` returns None (no update), text (``{"message": text}``)
    or a JSON object such as ``{"progress": {"done": 3, "total": 10}}``.
    """
    kept = tuple(streams) if isinstance(streams, list | tuple) else streams
    return LineUpdates(fn, kept)


def line_updates_snapshot(value: LineUpdates, ref: Callable[[object], Any]) -> dict[str, Any]:
    """How ``updates=`` appears in a definition snapshot (``ref``: a callable's name)."""
    streams = list(value.streams) if isinstance(value.streams, tuple) else repr(value.streams)
    return {"parseLine": ref(value.fn), "streams": streams}
