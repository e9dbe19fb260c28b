"""The script of ``pi-workflows model serve``: a JSON file of replies, and the default.

Owns reading a script file (``{"replies": [...]}``, each reply one of
``{"text": ...}``, ``{"submit": OUTPUT}``, ``{"tool": NAME, "arguments": {...}}``
or ``{"error": STATUS}``, each with an optional ``"delay"`` in seconds; a
bad file is one ``ScriptError`` sentence), and the function the scripted
model answers with: each model request takes the next reply; a request
right after an accepted submission is answered ``Submitted.`` without
taking one; once the replies run out (or with no file) every workflow
step gets the default reply, a submission built from the step's output
schema as its contract states it (``offline_output``); after a rejection the
default ends the turn with a text instead of submitting the same again. docs/agents.md
documents the format. Imports ``protocol.errors``, ``model.scripted`` and
``model.pienv``; never the worker.
"""

from __future__ import annotations

import json
import math
import threading
from collections import deque
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ...protocol.errors import UsageError
from .pienv import CONTRACT, step_in_progress
from .scripted import HttpError, Reply, Request, Text, ToolCalls, call, message_text

MAX_SCRIPT_BYTES = 1 << 20
MAX_DELAY_S = 60.0
KINDS = ("text", "submit", "tool", "error")
SCHEMA_LINE = "The output must match this JSON schema:\n"
ACCEPTED = "Accepted"  # how the worker's verdict on an accepted submission begins
IDLE_TEXT = ("This is pi-workflows' scripted model (`pi-workflows model serve`): it only"
             " answers workflow steps.")

REJECTED_TEXT = ("The scripted model cannot fix a rejected submission; script the output"
                 " with `model serve --script FILE`.")


class ScriptError(UsageError):
    """A script file that cannot be used: one sentence naming the file and the reply."""


def _delay(raw: Mapping[str, Any], where: str) -> float:
    value = raw.get("delay", 0)
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not (0 <= value <= MAX_DELAY_S and math.isfinite(value)):  # ints: no overflow
        raise ScriptError(f"{where}: delay must be 0 to {MAX_DELAY_S:g} seconds, got {value!r}")
    return float(value)


def _check_reply(raw: Any, where: str) -> dict[str, Any]:
    if not isinstance(raw, Mapping):
        raise ScriptError(f"{where} must be an object such as {{\"text\": \"hello\"}}")
    kinds = [k for k in KINDS if k in raw]
    if len(kinds) != 1:
        raise ScriptError(f"{where} must have exactly one of {', '.join(KINDS)}")
    allowed = {kinds[0], "delay", *(("arguments",) if kinds[0] == "tool" else ())}
    if extra := sorted(str(k) for k in raw if k not in allowed):
        raise ScriptError(f"{where}: unknown key(s) {', '.join(extra)}")
    kind, value = kinds[0], raw[kinds[0]]
    if kind == "text" and not isinstance(value, str):
        raise ScriptError(f"{where}: text must be a string")
    if kind == "tool" and not (isinstance(value, str) and value):
        raise ScriptError(f"{where}: tool must be a tool name")
    if kind == "tool" and not isinstance(raw.get("arguments", {}), Mapping):
        raise ScriptError(f"{where}: arguments must be an object")
    if kind == "error" and not (isinstance(value, int) and not isinstance(value, bool)
                                and 400 <= value <= 599):
        raise ScriptError(f"{where}: error must be an HTTP status from 400 to 599")
    _delay(raw, where)
    return dict(raw)


def load_script(path: Path) -> list[dict[str, Any]]:
    """The replies of a script file, checked; ``ScriptError`` for anything wrong."""
    name = f"--script {path}"
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ScriptError(f"{name}: cannot read it ({exc.strerror or exc})") from None
    if len(data) > MAX_SCRIPT_BYTES:
        raise ScriptError(f"{name}: larger than {MAX_SCRIPT_BYTES} bytes")
    try:
        script = json.loads(data)
    except ValueError as exc:
        raise ScriptError(f"{name}: not JSON ({exc})") from None
    if not isinstance(script, Mapping) or not isinstance(script.get("replies"), list):
        raise ScriptError(f"{name}: must be an object with a list of replies:"
                          ' {"replies": [{"submit": {...}}, ...]}')
    if extra := sorted(str(k) for k in script if k != "replies"):
        raise ScriptError(f"{name}: unknown key(s) {', '.join(extra)}")
    return [_check_reply(r, f"{name}: reply {i + 1}")
            for i, r in enumerate(script["replies"])]


def offline_output(schema: Any, name: str = "result") -> Any:
    """A plausible value of a small JSON schema (type, properties, items, enum)."""
    if not isinstance(schema, Mapping):
        return f"{name} from the scripted model"
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "object" or "properties" in schema or "required" in schema:
        found = schema.get("properties")
        props: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
        keys = [*props, *(k for k in schema.get("required") or () if k not in props)]
        return {str(k): offline_output(props.get(k), str(k)) for k in keys} or {"ok": True}
    if kind == "array":
        return [offline_output(schema.get("items"), f"one of the {name}")]
    return {"number": 1, "integer": 1, "boolean": True, "null": None}.get(
        str(kind), f"{name} from the scripted model")


def _schema(request: Request) -> Any:
    """The output schema the newest step contract in the request states (None: none)."""
    for message in reversed(request.messages):
        text = message_text(message) if message.get("role") == "user" else ""
        if CONTRACT.search(text):
            _, found, rest = text.rpartition(SCHEMA_LINE)
            if not found:
                return None
            try:
                return json.loads(rest.splitlines()[0])
            except (ValueError, IndexError):
                return None
    return None


def _after_accepted(messages: list[dict[str, Any]]) -> bool:
    """The request answers a ``workflow`` tool call the worker accepted."""
    if len(messages) < 2 or messages[-1].get("role") != "tool":
        return False
    calls = messages[-2].get("tool_calls") or []
    names = [c.get("function", {}).get("name") for c in calls if isinstance(c, dict)]
    return "workflow" in names and message_text(messages[-1]).startswith(ACCEPTED)


def _submit(attempt: str, output: Any, delay: float = 0.0) -> Reply:
    step = attempt.rsplit("-", 2)[0]
    return ToolCalls(call("workflow", {"action": "submit", "step": step, "attempt": attempt,
                                       "output": output}), delay=delay)


def _play(raw: Mapping[str, Any], request: Request) -> Reply:
    delay = float(raw.get("delay", 0))
    if "text" in raw:
        return Text(str(raw["text"]), delay=delay)
    if "tool" in raw:
        arguments = dict(raw.get("arguments") or {})
        attempt = step_in_progress(request) if raw["tool"] == "workflow" else None
        if attempt is not None:  # a script cannot know the attempt id: the contract's
            arguments.setdefault("step", attempt.rsplit("-", 2)[0])
            arguments.setdefault("attempt", attempt)
        return ToolCalls(call(str(raw["tool"]), arguments), delay=delay)
    if "error" in raw:
        return HttpError(int(raw["error"]), delay=delay)
    attempt = step_in_progress(request)
    if attempt is None:
        return Text(IDLE_TEXT, delay=delay)
    return _submit(attempt, raw["submit"], delay)


def serve_script(replies: list[dict[str, Any]]) -> Callable[[Request], Reply]:
    """The scripted model's function: ``replies`` in order, then the default."""
    queue = deque(replies)
    lock = threading.Lock()

    def reply(request: Request) -> Reply:
        last = request.messages[-1] if request.messages else {}
        if _after_accepted(request.messages):
            return Text("Submitted.")
        with lock:
            scripted = queue.popleft() if queue else None
        if scripted is not None:
            return _play(scripted, request)
        attempt = step_in_progress(request)
        if attempt is None:
            return Text(IDLE_TEXT)
        if last.get("role") == "tool":
            # A rejected default would be rejected again: end the turn instead (the
            # worker's reminders bound what follows).
            return Text(REJECTED_TEXT)
        schema = _schema(request)
        return _submit(attempt, {"ok": True} if schema is None else offline_output(schema))

    return reply
