"""The scripted model's request log: what each request was, and what the HTTP side may ask.

Owns ``Request`` (one request as the server received it, and how it was
answered), ``message_text``, and ``ModelBackend``: the small interface the
HTTP side (``httpserver``, ``sse``) uses to record a request, take the
script's next reply, name it, finish it and report a problem, which
``model.ScriptedModel`` implements. With it the HTTP side never imports the
scripting API, so the model's modules import each other without a circle.
Imports the standard library and ``replies``.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from .replies import Reply


@dataclass
class Request:
    """One request as the server received it, and how it was answered."""

    index: int  # 0-based, over every request the server received
    method: str
    path: str
    headers: dict[str, str]  # lower-cased names, credentials left out
    body: Any  # the parsed JSON body; None without one
    received_at: float  # time.monotonic()
    reply: str = ""  # what answered it: "Text", "ToolCalls", "HttpError(500)", "exhausted", ...
    outcome: str = ""  # how the answer ended: "complete", "disconnected", "reset", ...

    @property
    def messages(self) -> list[dict[str, Any]]:
        body = self.body if isinstance(self.body, dict) else {}
        return list(body.get("messages") or [])

    @property
    def tools(self) -> list[dict[str, Any]]:
        body = self.body if isinstance(self.body, dict) else {}
        return list(body.get("tools") or [])

    @property
    def tool_names(self) -> list[str]:
        return [str(tool.get("function", {}).get("name")) for tool in self.tools]

    def texts(self, role: str) -> list[str]:
        """The text of every message with ``role``, in order."""
        return [message_text(m) for m in self.messages if m.get("role") == role]

    def describe(self) -> str:
        return f"#{self.index} {self.method} {self.path} -> {self.reply or '?'}" \
               f" ({self.outcome or 'unfinished'})"


def message_text(message: Mapping[str, Any]) -> str:
    """A chat message's text: its string content, or its text parts joined."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content
                       if isinstance(part, dict) and part.get("type") == "text")
    return ""


class ModelBackend(Protocol):
    """What a connection handler needs of the model it serves."""

    model_id: str
    stopping: threading.Event  # set once the server is stopping: ends delays and stalls

    def log_request(self, method: str, path: str, headers: dict[str, str],
                    body: Any) -> Request:
        """Log a request as it arrives (credentials already left out)."""

    def next_reply(self, request: Request) -> Reply | None:
        """The script's answer to ``request``; None when the script has none."""

    def mark_chosen(self, request: Request, reply: str) -> None:
        """Name the reply before it is sent: a client may look as soon as it has it."""

    def mark_finished(self, request: Request, reply: str, outcome: str) -> None:
        """Record how the answer ended."""

    def record_problem(self, text: str) -> None:
        """Something went wrong on the server's side; ``check()`` raises it."""
