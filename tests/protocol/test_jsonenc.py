"""One canonical encoding for everything hashed; trace lines stay readable UTF-8."""

from __future__ import annotations

import hashlib
from typing import Any

from pi_workflows import compute, define_workflow, definition_digest, edge, notify, snapshot
from pi_workflows.protocol.jsonenc import canonical_json, compact_json
from pi_workflows.worker.effects import fingerprint

VALUE = {"z": ["café", "✓", "🙂"], "a": {"y": 1, "b": None}}
# Sorted keys, no spaces, every non-ASCII character escaped (🙂 as a surrogate pair).
CANONICAL = ('{"a":{"b":null,"y":1},"z":["caf\\u00e9","\\u2713","\\ud83d\\ude42"]}')


def _sha(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("ascii")).hexdigest()


def test_canonical_json_is_ascii_sorted_and_compact() -> None:
    text = canonical_json(VALUE)
    assert text == CANONICAL
    assert text.isascii()
    assert canonical_json(dict(reversed(list(VALUE.items())))) == text  # key order is irrelevant


def test_compact_json_keeps_non_ascii_text_as_utf8() -> None:
    assert compact_json(VALUE) == '{"a":{"b":null,"y":1},"z":["café","✓","🙂"]}'


def _double(ctx: Any) -> int:
    return 2


def _non_ascii_workflow() -> Any:
    return define_workflow(
        name="cafe", description="Café ✓ — résumé 🙂", start_at="a",
        nodes=[compute("a", _double), notify("b", "Prêt: ✓")], edges=[edge("a", "b")],
    )


def test_definition_digest_hashes_the_canonical_text() -> None:
    wf = _non_ascii_workflow()
    text = canonical_json(snapshot(wf))
    assert text.isascii() and "Caf\\u00e9 \\u2713" in text
    assert definition_digest(wf) == _sha(text)


def test_definition_digest_of_non_ascii_text_is_unchanged() -> None:
    # Pinned runs compare digests across versions: this one was computed by the
    # encoding the project shipped before the JSON encoders were merged.
    assert definition_digest(_non_ascii_workflow()) == (
        "sha256:cbf56face38e73829797a46911d16de9cfb1e22b45ff012809ea7cd58f643a7d"
    )


def test_effect_fingerprints_use_the_canonical_encoding() -> None:
    request = {"kind": "shell", "argv": ["echo", "café ✓"], "cwd": "/tmp", "env": {},
               "stdin": None, "step": 1}
    assert fingerprint(request) == _sha(canonical_json(request))
    assert fingerprint(request) == _sha(
        '{"argv":["echo","caf\\u00e9 \\u2713"],"cwd":"/tmp","env":{},"kind":"shell",'
        '"stdin":null,"step":1}'
    )
