"""The scripted model's event stream: one streamed chat completion on the wire.

Owns ``EventStream`` (the ``text/event-stream`` response of ``chat.completion.chunk``
objects in a chunked HTTP body, the way Pi's ``openai-completions`` provider
reads it: role, text or ``tool_calls`` deltas, the ``finish_reason`` chunk, a
usage chunk, ``data: [DONE]``), the splitting of tool-call arguments into
pieces, and ``Disconnected`` (the client went away while we wrote). Imports
the standard library, ``replies`` and ``requestlog``; never ``scripted``
or the worker.
"""

from __future__ import annotations

import json
import time
from http.server import BaseHTTPRequestHandler
from typing import Any

from .replies import ToolCall
from .requestlog import Request


class Disconnected(Exception):
    """The client went away while we were writing or waiting."""


class EventStream:
    """One SSE response of ``chat.completion.chunk`` objects in a chunked HTTP body."""

    def __init__(self, handler: BaseHTTPRequestHandler, request: Request,
                 model_id: str) -> None:
        self._handler = handler
        self._id = f"chatcmpl-scripted-{request.index}"
        self._index = request.index
        body = request.body if isinstance(request.body, dict) else {}
        self._model = str(body.get("model") or model_id)
        self._created = int(time.time())
        self._prompt_chars = len(json.dumps(body.get("messages") or []))
        self._sent_chars = 0

    def begin(self) -> None:
        h = self._handler
        try:
            h.send_response(200)
            h.send_header("Content-Type", "text/event-stream")
            h.send_header("Cache-Control", "no-cache")
            h.send_header("Transfer-Encoding", "chunked")
            h.send_header("Connection", "close")
            h.end_headers()
        except OSError as err:
            raise Disconnected from err
        h.close_connection = True
        self._chunk({"role": "assistant", "content": ""})

    def content(self, text: str) -> None:
        self._sent_chars += len(text)
        self._chunk({"content": text})

    def tool_call(self, index: int, tool_call: ToolCall) -> None:
        call_id = tool_call.id or f"call_{self._index}_{index}"
        self._chunk({"tool_calls": [{"index": index, "id": call_id, "type": "function",
                                     "function": {"name": tool_call.name, "arguments": ""}}]})
        args = tool_call.arguments_json
        self._sent_chars += len(args)
        for piece in _split(args, tool_call.pieces):
            self._chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})

    def end(self, finish: str, usage: tuple[int, int] | None) -> None:
        self._chunk({}, finish)
        prompt, completion = usage or (max(1, self._prompt_chars // 4),
                                       max(1, self._sent_chars // 4))
        self._event({"id": self._id, "object": "chat.completion.chunk",
                     "created": self._created, "model": self._model, "choices": [],
                     "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                               "total_tokens": prompt + completion}})
        self._write(b"data: [DONE]\n\n")
        self._write(b"", last=True)

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> None:
        self._event({"id": self._id, "object": "chat.completion.chunk",
                     "created": self._created, "model": self._model,
                     "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    def _event(self, payload: dict[str, Any]) -> None:
        self._write(b"data: " + json.dumps(payload).encode() + b"\n\n")

    def _write(self, data: bytes, last: bool = False) -> None:
        # One HTTP chunk per SSE event, flushed, so the client sees each delta as it is sent.
        frame = b"%x\r\n%s\r\n" % (len(data), data) if data else b""
        if last:
            frame += b"0\r\n\r\n"
        try:
            self._handler.wfile.write(frame)
            self._handler.wfile.flush()
        except OSError as err:
            raise Disconnected from err


def _split(text: str, pieces: int) -> list[str]:
    """``text`` in up to ``pieces`` consecutive non-empty parts (at least one part)."""
    if not text or pieces <= 1:
        return [text]
    size = -(-len(text) // pieces)
    return [text[i:i + size] for i in range(0, len(text), size)]
