"""Large strings in bundle JSON, stored once by content hash.

Any string longer than 4 KiB inside a value written to the trace or the
projection is moved to ``artifacts/<sha256>`` and replaced by
``{"$artifact": "sha256:<hex>", "bytes": n}``; readers put it back. The key
``$artifact`` is reserved in run data. Imports ``protocol.atomic``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .atomic import write_atomic

THRESHOLD_BYTES = 4096
REF_KEY = "$artifact"


def is_ref(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {REF_KEY, "bytes"}


def reserved_key_path(value: Any, where: str = "$") -> str | None:
    """Where ``value`` uses the reserved key ``$artifact`` (a path like ``$.a.0``), or None.

    Run data (input, outputs, answers) must not contain it: a reader would
    take such an object for an artifact reference.
    """
    if isinstance(value, dict):
        if REF_KEY in value:
            return where
        for key, item in value.items():
            found = reserved_key_path(item, f"{where}.{key}")
            if found:
                return found
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            found = reserved_key_path(item, f"{where}.{i}")
            if found:
                return found
    return None


def externalize(value: Any, put: Callable[[str], dict[str, Any]]) -> Any:
    """Replace every long string in ``value`` with the reference ``put`` returns."""
    if isinstance(value, str):
        # A string of at most 1024 characters cannot exceed 4 KiB of UTF-8.
        if len(value) * 4 > THRESHOLD_BYTES and len(value.encode()) > THRESHOLD_BYTES:
            return put(value)
        return value
    if isinstance(value, dict):
        return {k: externalize(v, put) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [externalize(v, put) for v in value]
    return value


def internalize(value: Any, get: Callable[[str], str]) -> Any:
    """Inverse of ``externalize``."""
    if is_ref(value):
        return get(value[REF_KEY])
    if isinstance(value, dict):
        return {k: internalize(v, get) for k, v in value.items()}
    if isinstance(value, list):
        return [internalize(v, get) for v in value]
    return value


class ArtifactDir:
    """The ``artifacts/`` folder of one bundle."""

    def __init__(self, path: Path, *, sync: bool = False) -> None:
        self.path = path
        self.sync = sync

    def put(self, text: str) -> dict[str, Any]:
        data = text.encode()
        digest = hashlib.sha256(data).hexdigest()
        target = self.path / digest
        if not target.exists():  # content-addressed: an existing file is identical
            self.path.mkdir(mode=0o700, exist_ok=True)
            write_atomic(target, data, sync=self.sync)
        return {REF_KEY: f"sha256:{digest}", "bytes": len(data)}

    def get(self, ref: str) -> str:
        algo, _, digest = ref.partition(":")
        if algo != "sha256" or len(digest) != 64 or digest.strip("0123456789abcdef"):
            raise ValueError(f"bad artifact reference {ref[:80]!r}")
        return (self.path / digest).read_bytes().decode()
