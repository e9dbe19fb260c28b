"""A live, bounded copy of a shell step's output while it runs (``output.ndjson``).

Owns turning the chunks a shell command writes into small records in the
bundle's ``output.ndjson``, flushed a few times a second, so a view can show
the output as it is produced and ``logs --follow`` can tail it. The step's
result (its ``stdout``/``stderr`` in the trace) stays the record of what the
command printed; this file is evidence for people and is never read back by
the engine. Each attempt's copy is capped per stream; past the cap one
``truncated`` record is written and the rest is dropped; the whole file is
capped too. Writes go through a
fenced bundle writer; a failing write never fails the step, it only stops
the copy. Imports ``protocol``.
"""

from __future__ import annotations

import codecs
import threading
import time
from collections.abc import Callable
from typing import Any

from ..protocol.clock import now_ms

MAX_STREAM_BYTES = 1_048_576  # per stream and attempt, whatever the node allows
MAX_RUN_BYTES = 64 * 1_048_576  # the whole file: a step in a loop must not fill the disk
FLUSH_S = 0.1
Write = Callable[[list[dict[str, Any]]], None]


class OutputStream:
    """One shell attempt: ``feed`` from the pipe readers, ``tick`` and ``close`` from the node."""

    def __init__(self, write: Write, node_id: str, attempt_id: str, limit: int,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self._write = write
        self._head = {"nodeId": node_id, "attemptId": attempt_id}
        self._limit = max(0, min(limit, MAX_STREAM_BYTES))
        self._seen: dict[str, int] = {}
        self._decoders: dict[str, codecs.IncrementalDecoder] = {}
        self._pending: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._monotonic = monotonic
        self._last_flush = monotonic()
        self.broken = False

    def feed(self, stream: str, chunk: bytes) -> None:
        """Keep what fits under the cap; called by the thread reading ``stream``."""
        if self.broken:
            return
        with self._lock:
            seen = self._seen.get(stream, 0)
            self._seen[stream] = seen + len(chunk)
            if seen > self._limit:
                return  # already marked truncated
            kept = chunk[: self._limit - seen]
            decoder = self._decoders.setdefault(
                stream, codecs.getincrementaldecoder("utf-8")(errors="replace"))
            text = decoder.decode(kept, final=len(kept) < len(chunk))
            if text:
                self._add(stream, text=text)
            if len(kept) < len(chunk):
                self._add(stream, truncated=True)

    def _add(self, stream: str, **fields: Any) -> None:
        last = self._pending[-1] if self._pending else None
        if (last is not None and "text" in fields and last["stream"] == stream
                and "text" in last):
            last["text"] += fields["text"]  # one record per stream and flush
            return
        self._pending.append({"at": now_ms(), **self._head, "stream": stream, **fields})

    def tick(self) -> None:
        """Write what waited at least ``FLUSH_S``: a line printed before a pause shows up."""
        if self._pending and self._monotonic() - self._last_flush >= FLUSH_S:
            self.flush()

    def close(self) -> None:
        with self._lock:
            for stream, decoder in self._decoders.items():
                rest = decoder.decode(b"", final=True)
                if rest and self._seen.get(stream, 0) <= self._limit:
                    self._add(stream, text=rest)
        self.flush()

    def flush(self) -> None:
        with self._lock:
            batch, self._pending = self._pending, []
            self._last_flush = self._monotonic()
        if not batch or self.broken:
            return
        try:
            self._write(batch)
        except Exception:  # evidence only: never a reason to fail the step
            self.broken = True


class OutputStreams:
    """Where a run's shell steps stream to: one ``OutputStream`` per attempt.

    ``size`` tells how large the file already is; once it holds
    ``MAX_RUN_BYTES``, a new attempt's copy is only its ``truncated`` mark.
    """

    def __init__(self, write: Write, size: Callable[[], int] = lambda: 0) -> None:
        self._write = write
        self._size = size

    def open(self, node_id: str, attempt_id: str, limit: int) -> OutputStream:
        try:
            full = self._size() >= MAX_RUN_BYTES
        except OSError:
            full = False  # not written yet
        return OutputStream(self._write, node_id, attempt_id, 0 if full else limit)
