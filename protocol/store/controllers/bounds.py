"""Bounds on what controllers put in the store, checked before any write.

Owns the controller-name and resource-key rules, the 256 KiB bound on spec,
status, effect results and event data (canonical JSON), the request
fingerprint (sha256 of ``protocol.jsonenc.canonical_json``) and the status
patch rules (which fields, condition shape). Every refusal is a
``LimitError`` with a code and a message that names the limit. Imports
``protocol.errors``, ``protocol.limits`` and ``protocol.jsonenc`` only.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from ...errors import LimitError
from ...jsonenc import canonical_json
from ...limits import safe_error_message

CONTROLLER_NAME_PATTERN = r"^[a-z][a-z0-9-]*$"
MAX_CONTROLLER_NAME_CHARS = 63
MAX_RESOURCE_KEY_CHARS = 253
MAX_DOCUMENT_BYTES = 256 * 1024
MAX_FINALIZERS = 16
CONDITION_STATUSES = ("true", "false", "unknown")
STATUS_FIELDS = ("observed_generation", "conditions", "workflow_run", "controller_status")


def validate_controller_name(name: object) -> str:
    """``^[a-z][a-z0-9-]*$``, at most 63 characters."""
    if not isinstance(name, str) or len(name) > MAX_CONTROLLER_NAME_CHARS \
            or not re.fullmatch(CONTROLLER_NAME_PATTERN, name):
        shown = repr(name)[:80]
        raise LimitError(f"invalid controller name {shown}: use 1-{MAX_CONTROLLER_NAME_CHARS}"
                         " of a-z 0-9 - starting with a letter", code="invalid_controller_name")
    return name


def validate_resource_key(key: object, what: str = "resource key") -> str:
    """A non-empty printable string of at most 253 characters, without whitespace
    (a key is typed as one word: in a shell, and in Pi's ``/controller``)."""
    if not isinstance(key, str) or not key:
        raise LimitError(f"{what} must be a non-empty string", code="invalid_resource_key")
    if len(key) > MAX_RESOURCE_KEY_CHARS:
        raise LimitError(f"{what} is longer than {MAX_RESOURCE_KEY_CHARS} characters",
                         code="invalid_resource_key")
    if not key.isprintable():
        raise LimitError(f"{what} contains non-printable characters",
                         code="invalid_resource_key")
    if any(c.isspace() for c in key):
        raise LimitError(f"{what} contains whitespace: use one word (notes-2, docs/readme)",
                         code="invalid_resource_key")
    return key


def encode_document(value: Any, what: str) -> str:
    """Canonical JSON of ``value``, at most 256 KiB; never echoes the value."""
    try:
        text = canonical_json(value)
    except (TypeError, ValueError) as exc:
        raise LimitError(f"{what} is not JSON-serialisable ({type(exc).__name__})",
                         code="document_invalid") from None
    if len(text) > MAX_DOCUMENT_BYTES:  # ASCII only: characters are bytes
        raise LimitError(f"{what} is {len(text)} bytes of canonical JSON; the limit is"
                         f" {MAX_DOCUMENT_BYTES} (256 KiB)", code="document_too_large")
    return text


def fingerprint(request: Any) -> str:
    """sha256 of the canonical JSON of ``request``, bounded like any document."""
    return hashlib.sha256(encode_document(request, "effect request").encode()).hexdigest()


def empty_status() -> dict[str, Any]:
    return {"observed_generation": None, "conditions": [], "workflow_run": None,
            "controller_status": None}


def _condition(value: object, generation: int) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise LimitError("a status condition must be an object", code="status_invalid")
    unknown = set(value) - {"type", "status", "reason", "message", "observed_generation",
                            "last_transition"}
    if unknown:
        raise LimitError(f"a status condition has unknown fields {sorted(unknown)}",
                         code="status_invalid")
    type_ = validate_resource_key(value.get("type"), "condition type")
    status = value.get("status", "unknown")
    if status not in CONDITION_STATUSES:
        raise LimitError(f"condition {type_}: status must be true, false or unknown",
                         code="status_invalid")
    reason = value.get("reason") or ""
    if not isinstance(reason, str) or len(reason) > 128 or not reason.isprintable():
        raise LimitError(f"condition {type_}: reason must be printable text of at most 128"
                         " characters", code="status_invalid")
    message = value.get("message")
    observed = value.get("observed_generation", generation)
    if observed is not None and (not isinstance(observed, int) or isinstance(observed, bool)):
        raise LimitError(f"condition {type_}: observed_generation must be an integer",
                         code="status_invalid")
    return {"type": type_, "status": status, "reason": reason,
            "message": "" if not message else safe_error_message(message),
            "observed_generation": observed}


def merge_status(old: dict[str, Any], patch: object, generation: int, now: int
                 ) -> dict[str, Any]:
    """``old`` with ``patch`` applied: top-level fields replaced, conditions merged by type.

    A condition keeps its ``last_transition`` while its status stays the
    same, and gets ``now`` when it changes (or first appears). Messages are
    redacted and bounded. Raises ``LimitError`` on anything else.
    """
    if not isinstance(patch, dict):
        raise LimitError("a status patch must be an object", code="status_invalid")
    unknown = set(patch) - set(STATUS_FIELDS)
    if unknown:
        raise LimitError(f"a status patch may set only {', '.join(STATUS_FIELDS)};"
                         f" got {sorted(unknown)}", code="status_invalid")
    out = {**empty_status(), **old}
    for field in ("workflow_run", "controller_status"):
        if field in patch:
            out[field] = patch[field]
    if "observed_generation" in patch:
        observed = patch["observed_generation"]
        if observed is not None and (not isinstance(observed, int) or isinstance(observed, bool)):
            raise LimitError("observed_generation must be an integer", code="status_invalid")
        out["observed_generation"] = observed
    if "conditions" in patch:
        given = patch["conditions"]
        if not isinstance(given, list):
            raise LimitError("conditions must be a list", code="status_invalid")
        before = {c.get("type"): c for c in out.get("conditions") or [] if isinstance(c, dict)}
        merged = dict(before)
        for value in given:
            cond = _condition(value, generation)
            prev = before.get(cond["type"])
            same = prev is not None and prev.get("status") == cond["status"]
            cond["last_transition"] = prev.get("last_transition", now) if same and prev else now
            merged[cond["type"]] = cond
        if len(merged) > 32:
            raise LimitError("a status holds at most 32 conditions", code="status_invalid")
        out["conditions"] = list(merged.values())
    encode_document(out, "status")
    return out
