"""How a node's progress updates read: a line of text, a bar and the time left.

Owns the wording of a recorded update (``3/10 files (30%) · copying``), of an
attempt's ``updates_dropped`` note, the text bar, the time-left estimate of
the live view (``ProgressTrack``: the rate so far, done per second since the
attempt's first progress update) and, for ``status --nodes`` (the Pi
widget), the latest update of the attempt in progress, read from the
trace's tail. Plain text only (the live view styles it), so ``watch``
without a terminal does not load rich. Reads only. Imports ``protocol``
and ``views.timefmt``.
"""

from __future__ import annotations

import json
import os
from typing import Any

from ...protocol.bundle import Bundle
from ...protocol.record import record
from ...protocol.updates import Progress, progress_of, update_data
from .timefmt import duration

BAR_WIDTH = 24
TAIL_BYTES = 65_536  # of the trace, for the latest update of the running attempt


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.4g}"


def progress_text(progress: Progress) -> str:
    """``3/10 files (30%)``, or ``3 files`` without a total."""
    unit = f" {progress.unit}" if progress.unit else ""
    if progress.total is None:
        return f"{_number(progress.done)}{unit}"
    percent = int((progress.fraction or 0.0) * 100)
    return f"{_number(progress.done)}/{_number(progress.total)}{unit} ({percent}%)"


def update_text(data: Any) -> str:
    """One recorded update (its data, or an ``update_published`` payload) as a line."""
    if isinstance(data, dict) and "data" in data:
        data = update_data(data)
    if not isinstance(data, dict):
        return ""
    parts = []
    progress = progress_of(data)
    if progress is not None:
        parts.append(progress_text(progress))
        if progress.message:
            parts.append(progress.message)
    message = data.get("message")
    if isinstance(message, str) and message:
        parts.append(message)
    if not parts:  # an author's own fields: shown as they are, briefly
        text = json.dumps(data, sort_keys=True, ensure_ascii=False)
        parts.append(text if len(text) <= 160 else text[:159] + "…")
    return " · ".join(parts)


def dropped_text(payload: dict[str, Any]) -> str:
    """An ``updates_dropped`` note: what the attempt's updates lost, and why."""
    said = []
    refused, over = payload.get("refused") or 0, payload.get("overLimit") or 0
    if refused:
        first = f" (the first: {payload['error']})" if payload.get("error") else ""
        said.append(f"{refused} update(s) refused{first}")
    if over:
        said.append(f"{over} update(s) over the limit per step not recorded")
    return "; ".join(said) or "no update was dropped"


def bar(fraction: float, width: int = BAR_WIDTH) -> str:
    filled = round(max(0.0, min(1.0, fraction)) * width)
    return "█" * filled + "░" * (width - filled)


@record
class ProgressTrack:
    """One attempt's progress as its updates arrive (times in ms, from the trace)."""

    first_at: int
    first_done: float
    last_at: int
    last: Progress
    message: str | None = None

    @classmethod
    def start(cls, at: int, progress: Progress, message: str | None = None) -> ProgressTrack:
        return cls(at, progress.done, at, progress, message)

    def see(self, at: int, progress: Progress, message: str | None = None) -> None:
        if progress.done < self.first_done:  # counting again from lower: a new count
            self.first_at, self.first_done = at, progress.done
        self.last_at, self.last, self.message = at, progress, message

    def left_ms(self, now: int) -> int | None:
        """The time left at the rate so far, counted down since the last update."""
        total, done = self.last.total, self.last.done
        span, gained = self.last_at - self.first_at, done - self.first_done
        if total is None or span <= 0 or gained <= 0:
            return None
        if done >= total:
            return 0
        left = (total - done) / (gained / span) - max(0, now - self.last_at)
        return max(0, int(left))

    def line(self, now: int) -> str:
        """``[████░░░░] 3/10 files (30%) · about 12s left · copying`` (no bar without a total)."""
        parts = []
        if self.last.fraction is not None:
            parts.append(f"[{bar(self.last.fraction)}] {progress_text(self.last)}")
        else:
            parts.append(progress_text(self.last))
        left = self.left_ms(now)
        if left is not None and self.last.fraction is not None and self.last.fraction < 1:
            parts.append(f"about {_left_text(left)} left")
        for said in (self.last.message, self.message):
            if said:
                parts.append(said)
        return " · ".join(parts)


def _left_text(ms: int) -> str:
    """Whole seconds under a minute: an estimate that ticks in tenths only looks exact."""
    return f"{max(1, round(ms / 1000))} s" if ms < 59_500 else duration(ms)


def _tail_lines(bundle: Bundle) -> list[bytes]:
    """The trace's last ``TAIL_BYTES`` as lines, newest first (the first may be cut)."""
    try:
        with open(bundle.trace_path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            fh.seek(max(0, size - TAIL_BYTES))
            tail = fh.read()
    except OSError:
        return []
    return list(reversed(tail.split(b"\n")))


def _event(line: bytes) -> dict[str, Any] | None:
    try:
        event = json.loads(line)
    except ValueError:
        return None  # the cut first line, or a torn last one
    return event if isinstance(event, dict) else None


def running_update(bundle: Bundle, attempt_id: Any) -> dict[str, Any] | None:
    """The latest update of ``attempt_id`` in the trace's last ``TAIL_BYTES``, or None."""
    if not isinstance(attempt_id, str):
        return None
    for line in _tail_lines(bundle):
        if b"update_published" not in line:
            continue
        event = _event(line)
        if event is not None and event.get("type") == "update_published" \
                and event.get("attemptId") == attempt_id:
            return update_data(event.get("payload")) or None
    return None


def node_update(bundle: Bundle, node_id: str) -> dict[str, Any] | None:
    """The latest update of ``node_id``'s current attempt (after its last start) in the
    trace's tail: ``running_update`` for a reader that has not read the projection."""
    for line in _tail_lines(bundle):
        if b"update_published" not in line and b"node_started" not in line:
            continue
        event = _event(line)
        if event is None or event.get("nodeId") != node_id:
            continue
        if event.get("type") == "node_started":
            return None
        if event.get("type") == "update_published":
            return update_data(event.get("payload")) or None
    return None


def updates_summary(updates: list[dict[str, Any]]) -> str | None:
    """The ``logs`` line of a step's updates: how many, and the last one."""
    if not updates:
        return None
    count = f"{len(updates)} updates, the last: " if len(updates) > 1 else ""
    return f"progress: {count}{update_text(updates[-1])}"
