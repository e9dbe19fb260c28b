"""Run ids: ``<UTC yyyymmddThhmmssZ>-<slug>-<8 hex>``, lexically chronological.

Imports only ``protocol.limits``.
"""

from __future__ import annotations

import re
import secrets
import time

from .limits import validate_run_id

_SLUG = r"[^a-z0-9]+"  # compiled on first use


def slugify(name: str) -> str:
    slug = re.sub(_SLUG, "-", name.lower()).strip("-")
    return slug[:40] or "run"


def new_run_id(workflow: str, *, now_s: float | None = None) -> str:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() if now_s is None else now_s))
    return validate_run_id(f"{stamp}-{slugify(workflow)}-{secrets.token_hex(4)}")
