"""The scripted model's replies: what one model request is answered with.

Owns the reply kinds a script is made of (``Text``, ``ToolCall`` and ``call``,
``ToolCalls``, ``HttpError``, ``Stall``, ``Close``) and the ``Reply`` union;
``supervisor.model.scripted`` explains how a script uses them and re-exports them.
A reply is plain data (a ``Stall`` also carries the events a test waits on);
how it is sent is ``httpserver``'s business. Imports the standard library only
(never the server modules, never the worker).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Text:
    """A text reply, one delta per argument; ``finish`` is the final ``finish_reason``."""

    deltas: tuple[str, ...]
    delay: float = 0.0
    finish: str = "stop"
    usage: tuple[int, int] | None = None  # (prompt, completion) tokens; None: estimated

    def __init__(self, *deltas: str, delay: float = 0.0, finish: str = "stop",
                 usage: tuple[int, int] | None = None) -> None:
        object.__setattr__(self, "deltas", deltas)
        object.__setattr__(self, "delay", delay)
        object.__setattr__(self, "finish", finish)
        object.__setattr__(self, "usage", usage)

    @property
    def text(self) -> str:
        return "".join(self.deltas)


@dataclass(frozen=True)
class ToolCall:
    """One tool call: ``arguments`` is sent as JSON (a str is sent as is, even if it is
    not valid JSON), split into ``pieces`` argument deltas."""

    name: str
    arguments: Mapping[str, Any] | str
    id: str = ""  # "": call_<request>_<index>
    pieces: int = 3

    @property
    def arguments_json(self) -> str:
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments)


def call(name: str, arguments: Mapping[str, Any] | str | None = None, *, id: str = "",
         pieces: int = 3) -> ToolCall:
    """A ``ToolCall`` (``arguments`` defaults to ``{}``)."""
    return ToolCall(name, {} if arguments is None else arguments, id, pieces)


@dataclass(frozen=True)
class ToolCalls:
    """One or more tool calls, after optional ``text``; ``finish_reason: tool_calls``."""

    calls: tuple[ToolCall, ...]
    text: str = ""
    delay: float = 0.0
    usage: tuple[int, int] | None = None

    def __init__(self, *calls: ToolCall, text: str = "", delay: float = 0.0,
                 usage: tuple[int, int] | None = None) -> None:
        if not calls:
            raise ValueError("ToolCalls needs at least one call")
        object.__setattr__(self, "calls", calls)
        object.__setattr__(self, "text", text)
        object.__setattr__(self, "delay", delay)
        object.__setattr__(self, "usage", usage)


@dataclass(frozen=True)
class HttpError:
    """An HTTP error response; ``body`` (a str, or JSON for anything else) defaults to an
    OpenAI-style error object."""

    status: int = 500
    body: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)
    delay: float = 0.0

    def payload(self) -> bytes:
        body = self.body
        if body is None:
            body = {"error": {"message": f"scripted HTTP {self.status}",
                              "type": "scripted_error", "code": self.status}}
        return (body if isinstance(body, str) else json.dumps(body)).encode()


class Stall:
    """Send ``before`` deltas, then block until ``release()``, a client disconnect, the
    server stopping, or ``timeout`` seconds; once released, send ``after`` and finish.

    ``outcome`` says which: "released", "disconnected", "stopped" or "timeout" (the
    last two are recorded as problems). One ``Stall`` answers one request.
    """

    def __init__(self, *before: str, after: Sequence[str] = (), delay: float = 0.0,
                 timeout: float = 60.0) -> None:
        self.before = before
        self.after = tuple(after)
        self.delay = delay
        self.timeout = timeout
        self.outcome: str | None = None
        self._released = threading.Event()
        self._reached = threading.Event()  # the ``before`` deltas are written
        self._done = threading.Event()  # ``outcome`` is set

    def release(self) -> None:
        self._released.set()

    @property
    def released(self) -> bool:
        return self._released.is_set()

    def wait_reached(self, timeout: float) -> None:
        """Block until the stall is in effect (its ``before`` deltas were sent)."""
        if not self._reached.wait(timeout):
            raise AssertionError(f"no request reached the stall within {timeout:g} s")

    def wait_done(self, timeout: float) -> str:
        """Block until the stall ended; its outcome."""
        if not self._done.wait(timeout):
            raise AssertionError(f"the stall did not end within {timeout:g} s")
        assert self.outcome is not None
        return self.outcome

    def __repr__(self) -> str:
        return f"Stall(before={self.before!r}, after={self.after!r}, outcome={self.outcome!r})"


@dataclass(frozen=True)
class Close:
    """Send the response headers and ``deltas`` (with ``headers=False``: nothing), then
    reset the connection: no finish chunk, no ``[DONE]``, no end of the chunked body."""

    deltas: tuple[str, ...]
    headers: bool = True
    delay: float = 0.0

    def __init__(self, *deltas: str, headers: bool = True, delay: float = 0.0) -> None:
        if deltas and not headers:
            raise ValueError("Close cannot send deltas without headers")
        object.__setattr__(self, "deltas", deltas)
        object.__setattr__(self, "headers", headers)
        object.__setattr__(self, "delay", delay)


Reply = Text | ToolCalls | HttpError | Stall | Close
