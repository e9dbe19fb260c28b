"""The package's two JSON text encodings, each for one purpose.

Owns ``canonical_json``, the one encoding anything is hashed over
(definition digests, effect fingerprints), and ``compact_json``, the
encoding of trace lines. Both sort keys and drop whitespace; they differ in
non-ASCII text: ``canonical_json`` escapes it (``\\u00e9``), so the hashed
bytes are plain ASCII and definition digests keep the value they always
had; ``compact_json`` writes it as UTF-8 so a trace stays readable.
Imports nothing from the package.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any


def canonical_json(value: Any) -> str:
    """The canonical text of ``value`` for hashing: sorted keys, no spaces, ASCII only."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def compact_json(value: Any) -> str:
    """``value`` as one compact line of UTF-8 text (sorted keys); never hash this."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def complete_lines(data: bytes) -> Iterator[tuple[Any, int]]:
    """Each complete, parseable JSON line of ``data`` with the offset just past it.

    Stops at the first line without its newline (a torn write) or that is not
    JSON: what comes after a damaged line is never trusted.
    """
    offset = 0
    while True:
        end = data.find(b"\n", offset)
        if end < 0:
            return
        try:
            value = json.loads(data[offset:end])
        except (ValueError, UnicodeDecodeError):
            return
        offset = end + 1
        yield value, offset
