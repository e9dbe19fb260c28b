"""Capture of an agent conversation into the bundle (seed 000, decision 7).

Owns turning Pi's event stream into a small record per attempt in
``session/events.ndjson``: assistant text deltas (batched), tool calls and
results (bounded), and each assistant message's end. Pi repeats the whole
partial message in every update; none of that is kept. Writes go through the
run's fenced bundle writer, and a failing capture never fails the workflow:
it stops capturing. Imports ``protocol`` and the worker's agent interface.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

from ..protocol.clock import now_ms
from .agent import AgentRequest

MAX_TEXT = 4000
MAX_ARGS = 2000
FLUSH_S = 0.25
Write = Callable[[list[dict[str, Any]]], None]


def _bounded(value: Any, limit: int) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True,
                                                           ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[:limit] + "…"


def _result_text(result: Any) -> str:
    content = (result or {}).get("content") if isinstance(result, dict) else None
    if isinstance(content, list):
        return " ".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
    return ""


class Capture:
    def __init__(self, write: Write) -> None:
        self._write = write
        self._pending: list[dict[str, Any]] = []
        self._text: list[str] = []
        self._text_attempt: tuple[str, str] | None = None
        self._last_flush = time.monotonic()
        self._lock = threading.Lock()
        self.broken = False

    def _record(self, request: AgentRequest, kind: str, **fields: Any) -> None:
        self._pending.append({"at": now_ms(), "nodeId": request.node_id,
                              "attemptId": request.attempt_id, "kind": kind, **fields})

    def _take_text(self, request: AgentRequest) -> None:
        if self._text and self._text_attempt is not None:
            node, attempt = self._text_attempt
            self._pending.append({"at": now_ms(), "nodeId": node, "attemptId": attempt,
                                  "kind": "text", "text": _bounded("".join(self._text), MAX_TEXT)})
        self._text, self._text_attempt = [], None

    def event(self, request: AgentRequest, event: dict[str, Any]) -> None:
        if self.broken:
            return
        kind = event.get("type")
        with self._lock:
            if kind == "message_update":
                delta = event.get("assistantMessageEvent") or {}
                if delta.get("type") == "text_delta" and isinstance(delta.get("delta"), str):
                    self._text_attempt = (request.node_id, request.attempt_id)
                    self._text.append(delta["delta"])
            elif kind == "tool_execution_start":
                self._take_text(request)
                self._record(request, "tool_start", tool=event.get("toolName"),
                             args=_bounded(event.get("args"), MAX_ARGS))
            elif kind == "tool_execution_end":
                self._record(request, "tool_end", tool=event.get("toolName"),
                             isError=bool(event.get("isError")),
                             result=_bounded(_result_text(event.get("result")), MAX_ARGS))
            elif kind == "message_end" and (event.get("message") or {}).get("role") == "assistant":
                self._take_text(request)
                self._record(request, "message_end",
                             stopReason=(event.get("message") or {}).get("stopReason"))
            else:
                return
            if time.monotonic() - self._last_flush >= FLUSH_S:
                self._take_text(request)  # long replies show up while they stream
        if self._pending:
            self.flush()

    def tick(self, request: AgentRequest) -> None:
        """Between events: write text that has waited longer than the flush interval."""
        with self._lock:
            if not self._text or time.monotonic() - self._last_flush < FLUSH_S:
                return
            self._take_text(request)
        self.flush()

    def flush(self) -> None:
        with self._lock:
            batch, self._pending = self._pending, []
            self._last_flush = time.monotonic()
        if not batch or self.broken:
            return
        try:
            self._write(batch)
        except Exception:  # capture is evidence, never a reason to fail the run
            self.broken = True
