"""A shell node's output lines, as they are printed, turned into progress updates.

Owns ``LineTap``: it sits where the pipe readers hand each chunk to the live
output copy (``worker.stream``), passes the chunk on, and splits the chosen
streams into complete lines (``\\n``-ended; a ``\\r`` before it is dropped;
what is left when the stream ends is its last line), each given to the
author's ``parse_line`` function. A line longer than ``MAX_LINE_BYTES`` is
cut there (the rest of it is skipped), so a command that never prints a
newline cannot grow memory. A function that raises, or returns what is not
an update, costs that line only: the command is never disturbed, and the
refusals are counted (``worker.updates``). Imports ``protocol`` and
``worker.updates``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol

from ..protocol.definitions.progress import LineUpdates
from ..protocol.limits import safe_error_message
from .updates import AttemptUpdates

MAX_LINE_BYTES = 65_536


class OutputTap(Protocol):
    """What the pipe readers of ``worker.nodes.run_shell`` feed."""

    def feed(self, stream: str, chunk: bytes) -> None: ...
    def tick(self) -> None: ...
    def close(self) -> None: ...


class _Splitter:
    def __init__(self, emit: Callable[[str], None]) -> None:
        self.emit = emit
        self.buffer = bytearray()
        self.skipping = False  # the rest of an over-long line

    def feed(self, chunk: bytes) -> None:
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            if end < 0:
                break
            if not self.skipping:
                self._take(chunk[start:end])
                if not self.skipping:
                    self._line()
            self.skipping = False  # the newline ends a skipped rest
            start = end + 1
        if not self.skipping:
            self._take(chunk[start:])

    def _take(self, part: bytes) -> None:
        room = MAX_LINE_BYTES - len(self.buffer)
        self.buffer.extend(part[:room])
        if len(part) > room:
            self._line()  # cut: what fits is the line, the rest until its newline is skipped
            self.skipping = True

    def _line(self) -> None:
        raw, self.buffer = bytes(self.buffer), bytearray()
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        self.emit(raw.decode(errors="replace"))

    def close(self) -> None:
        if self.buffer and not self.skipping:
            self._line()


class LineTap:
    """Feeds ``inner`` (the live copy, or None) and the line function of ``spec``."""

    def __init__(self, spec: LineUpdates, updates: AttemptUpdates,
                 inner: OutputTap | None = None) -> None:
        self.spec = spec
        self.updates = updates
        self.inner = inner
        self._lock = threading.Lock()  # one line at a time into the author's function
        self._splitters = {stream: _Splitter(self._line) for stream in spec.streams}

    def _line(self, line: str) -> None:
        try:
            data: Any = self.spec.fn(line)
        except Exception as exc:
            self.updates.refuse(safe_error_message(
                f"parse_line raised {type(exc).__name__}: {exc}"))
            return
        if data is not None:
            self.updates.offer(data, source="parse_line")

    def feed(self, stream: str, chunk: bytes) -> None:
        if self.inner is not None:
            self.inner.feed(stream, chunk)
        splitter = self._splitters.get(stream)
        if splitter is not None:
            with self._lock:
                splitter.feed(chunk)

    def tick(self) -> None:
        if self.inner is not None:
            self.inner.tick()

    def close(self) -> None:
        with self._lock:
            for splitter in self._splitters.values():
                splitter.close()
        self.updates.flush()  # the command's last progress, before its effect is recorded
        if self.inner is not None:
            self.inner.close()
