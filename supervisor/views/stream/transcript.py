"""An agent conversation as a chat transcript, read from Pi's own session file.

Owns ``transcript_entry`` (one line of the bundle's ``session/pi-session.jsonl``
as ``{"id", "at", "role": "user"|"assistant"|"tool", "text", "tools",
"isError"}``, or None for what is not a message: the session header, model
and thinking-level changes) and its bounds (each text cut at
``MAX_TEXT`` characters, tool arguments at ``MAX_ARGS``). The file is Pi's
and is only read. Imports the standard library only.
"""

from __future__ import annotations

import json
from typing import Any

MAX_TEXT = 8000
MAX_ARGS = 2000
ROLES = {"user": "user", "assistant": "assistant", "toolResult": "tool"}


def _cut(text: str, most: int) -> str:
    return text if len(text) <= most else text[:most] + f"… ({len(text) - most} more)"


def transcript_entry(record: dict[str, Any]) -> dict[str, Any] | None:
    message = record.get("message")
    if record.get("type") != "message" or not isinstance(message, dict):
        return None
    role = ROLES.get(str(message.get("role")))
    if role is None:
        return None
    content = message.get("content")
    parts = content if isinstance(content, list) else [{"type": "text", "text": content}]
    texts: list[str] = []
    tools: list[dict[str, Any]] = []
    for part in parts:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "text" and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif part.get("type") == "toolCall":
            args = part.get("arguments")
            shown = args if isinstance(args, str) else json.dumps(args, sort_keys=True)
            tools.append({"name": str(part.get("name") or ""), "arguments": _cut(shown, MAX_ARGS)})
    entry: dict[str, Any] = {"id": record.get("id"), "at": record.get("timestamp"),
                             "role": role, "text": _cut("\n".join(texts), MAX_TEXT),
                             "tools": tools, "isError": bool(message.get("isError"))}
    if role == "tool":
        entry["tool"] = str(message.get("toolName") or "")
    return entry
