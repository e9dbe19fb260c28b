"""Structured progress updates: their shape, their bounds and their redaction.

Owns what one update is once accepted (a JSON object, text becoming
``{"message": text}``), the checks that refuse a malformed one with one
clear sentence, the redaction of every string in it (as error messages are
redacted: ``protocol.limits.redact``), the size bound per update and the
rate and count bounds per node attempt that ``worker.updates`` enforces,
and the tolerant reading of a recorded update's ``progress``
(``progress_of``) that the views share. The ``update_published`` trace
event carries ``{"data": <update>}`` and, when the update has a message,
``"message"`` too (what older readers show). Imports ``protocol.limits``,
``protocol.jsonenc`` and ``protocol.record`` only (the command line loads it).
"""

from __future__ import annotations

import math
from typing import Any, TypeGuard

from .jsonenc import canonical_json
from .limits import redact
from .record import record

MAX_UPDATE_BYTES = 4096  # canonical JSON of one update
MAX_MESSAGE_CHARS = 500  # a message is one line of at most this many characters
MAX_UPDATES_PER_ATTEMPT = 1000  # recorded events of one node attempt
MIN_INTERVAL_S = 0.2  # at most five updates a second per attempt; the latest is kept
MAX_DEPTH = 8


class UpdateError(ValueError):
    """An update that cannot be recorded; the message says why, in one sentence."""


def _number(value: Any) -> TypeGuard[int | float]:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an int too large for a float: no count a bar can show
        return False


def _shown(value: Any) -> str:
    """A value in a refusal, briefly: the refusal may be shown to a model or a person."""
    text = repr(value)
    return text if len(text) <= 60 else text[:59] + "…"


def _clean(value: Any, depth: int = 0) -> Any:
    """A JSON copy of ``value`` with every string redacted; refuses what is not JSON."""
    if depth > MAX_DEPTH:
        raise UpdateError(f"an update nests deeper than {MAX_DEPTH} levels")
    if isinstance(value, str):
        return redact(value)
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise UpdateError(f"an update holds the number {value!r}, which JSON cannot carry")
        return value
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise UpdateError(f"an update's keys must be strings, got {type(key).__name__}")
            out[redact(key)] = _clean(item, depth + 1)
        return out
    if isinstance(value, list | tuple):
        return [_clean(item, depth + 1) for item in value]
    raise UpdateError(f"an update must be JSON, but it holds a {type(value).__name__}")


def _message(text: str) -> str:
    one_line = " ".join(redact(text).split())
    return one_line[:MAX_MESSAGE_CHARS]


def _progress_problem(progress: Any) -> str | None:
    if not isinstance(progress, dict):
        return f"progress must be an object like {{\"done\": 3, \"total\": 10}}," \
               f" got {type(progress).__name__}"
    done, total = progress.get("done"), progress.get("total")
    if not _number(done) or done < 0:
        return f"progress.done must be a number of at least 0, got {_shown(done)}"
    if total is not None and not (_number(total) and total > 0):
        return f"progress.total must be a number above 0 (or left out), got {_shown(total)}"
    for key in ("unit", "message"):
        if progress.get(key) is not None and not isinstance(progress.get(key), str):
            return f"progress.{key} must be text, got {type(progress.get(key)).__name__}"
    return None


def normalize_update(value: Any) -> dict[str, Any]:
    """The update as recorded: text is ``{"message": text}``; raises ``UpdateError``."""
    if isinstance(value, str):
        value = {"message": value}
    if not isinstance(value, dict):
        raise UpdateError("an update must be a JSON object or text,"
                          f" got {type(value).__name__}")
    data: dict[str, Any] = _clean(value)
    if "message" in data:
        if not isinstance(data["message"], str):
            raise UpdateError(f"an update's message must be text,"
                              f" got {type(data['message']).__name__}")
        data["message"] = _message(data["message"])
        if not data["message"]:
            del data["message"]
    if "progress" in data:
        problem = _progress_problem(data["progress"])
        if problem:
            raise UpdateError(problem)
        if isinstance(data["progress"].get("message"), str):
            data["progress"]["message"] = _message(data["progress"]["message"])
    if not data:
        raise UpdateError("an update is empty; give it a message or a progress")
    size = len(canonical_json(data).encode())
    if size > MAX_UPDATE_BYTES:
        raise UpdateError(f"an update is {size} bytes of JSON; at most {MAX_UPDATE_BYTES}")
    return data


def event_payload(data: dict[str, Any]) -> dict[str, Any]:
    """The ``update_published`` payload of a normalized update."""
    payload: dict[str, Any] = {"data": data}
    if isinstance(data.get("message"), str):
        payload["message"] = data["message"]
    return payload


def update_data(payload: Any) -> dict[str, Any]:
    """A recorded ``update_published`` payload's update (an older one: its message)."""
    if not isinstance(payload, dict):
        return {}
    data = payload.get("data")
    if isinstance(data, dict):
        return data
    message = payload.get("message")
    return {"message": message} if isinstance(message, str) else {}


@record(frozen=True)
class Progress:
    done: float
    total: float | None
    unit: str | None = None
    message: str | None = None

    @property
    def fraction(self) -> float | None:
        if self.total is None:
            return None
        return max(0.0, min(1.0, self.done / self.total))


def progress_of(data: Any) -> Progress | None:
    """The ``progress`` of a recorded update, or None; never raises on a bad shape."""
    progress = data.get("progress") if isinstance(data, dict) else None
    if not isinstance(progress, dict) or _progress_problem(progress):
        return None
    unit, message = progress.get("unit"), progress.get("message")
    total = progress.get("total")
    return Progress(float(progress["done"]), None if total is None else float(total),
                    unit if isinstance(unit, str) else None,
                    message if isinstance(message, str) else None)
