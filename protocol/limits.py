"""Input limits and redaction applied wherever data enters durable state.

Owns: run-id and key validation, size bounds for private input and payloads,
and the redaction + bounding of stored error messages. Imports only
``protocol.errors``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .errors import LimitError

# Patterns are compiled on first use (re caches them), not at import: the worker
# boots on this path.
RUN_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$"
MAX_KEY_CHARS = 512
MAX_PRIVATE_INPUT_BYTES = 1024 * 1024
MAX_PAYLOAD_BYTES = 64 * 1024
MAX_ERROR_BYTES = 2048

_SECRET_PATTERNS = [
    # Bearer tokens in headers or prose.
    r"(?i)\b(bearer)\s+[A-Za-z0-9._~+/=-]+",
    # key=value and key: value forms for well-known secret names, also with a
    # quoted key as in JSON or a Python dict repr ("password": "...").
    (r"(?i)\b([A-Za-z0-9_-]*(?:token|api[_-]?key|secret|password|passwd))"
     r"([\"']?\s*[=:]\s*)(\"[^\"]*\"|'[^']*'|[^\s,;&\"']+)"),
]


def validate_run_id(run_id: object) -> str:
    """Return ``run_id`` if it is a safe run id (no path traversal), else raise."""
    if not isinstance(run_id, str) or not re.fullmatch(RUN_ID_PATTERN, run_id):  # "$" allows "\n"
        shown = repr(run_id)[:60]
        raise LimitError(
            f"invalid run id {shown}: use 1-200 of A-Z a-z 0-9 . _ -"
            " starting with a letter or digit",
            code="invalid_run_id",
        )
    return run_id


def validate_session_id(session_id: object) -> str:
    """Session ids follow the run-id rule: they name rows, sockets and log lines."""
    if not isinstance(session_id, str) or not re.fullmatch(RUN_ID_PATTERN, session_id):
        shown = repr(session_id)[:60]
        raise LimitError(
            f"invalid session id {shown}: use 1-200 of A-Z a-z 0-9 . _ -"
            " starting with a letter or digit",
            code="invalid_session_id",
        )
    return session_id


def validate_key(value: object, what: str = "key") -> str:
    """Keys (session ids, runner ids, node ids, effect keys) are short printable text."""
    if not isinstance(value, str) or not value:
        raise LimitError(f"{what} must be a non-empty string", code="invalid_key")
    if len(value) > MAX_KEY_CHARS:
        raise LimitError(f"{what} is longer than {MAX_KEY_CHARS} characters", code="invalid_key")
    if not value.isprintable():
        raise LimitError(f"{what} contains non-printable characters", code="invalid_key")
    return value


def encode_private_input(value: Any) -> str:
    """Serialise run input for the queue; never echo the value in an error."""
    try:
        text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise LimitError(
            f"run input is not JSON-serialisable ({type(exc).__name__})", code="input_invalid"
        ) from None
    if len(text.encode()) > MAX_PRIVATE_INPUT_BYTES:
        raise LimitError(
            f"run input is larger than {MAX_PRIVATE_INPUT_BYTES} bytes", code="input_too_large"
        )
    return text


def encode_payload(value: Any, what: str = "payload") -> str:
    """Serialise a feed/notification payload bounded to 64 KiB."""
    try:
        text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise LimitError(f"{what} is not JSON-serialisable ({type(exc).__name__})") from None
    if len(text.encode()) > MAX_PAYLOAD_BYTES:
        raise LimitError(
            f"{what} is larger than {MAX_PAYLOAD_BYTES} bytes", code="payload_too_large"
        )
    return text


def redact(text: str) -> str:
    """Replace the values of well-known secrets with ``[redacted]``."""
    text = re.sub(_SECRET_PATTERNS[0], lambda m: f"{m.group(1)} [redacted]", text)
    return re.sub(_SECRET_PATTERNS[1], lambda m: f"{m.group(1)}{m.group(2)}[redacted]", text)


def safe_error_message(text: object, *, fallback: str = "unknown error") -> str:
    """Redact and bound a message to 1..2048 UTF-8 bytes, on one line."""
    raw = str(text) if text is not None else ""
    cleaned = " ".join(redact(raw).split())
    if not cleaned:
        cleaned = fallback
    data = cleaned.encode()
    if len(data) > MAX_ERROR_BYTES:
        marker = " [truncated]"
        keep = MAX_ERROR_BYTES - len(marker.encode())
        cleaned = data[:keep].decode(errors="ignore") + marker
    return cleaned
