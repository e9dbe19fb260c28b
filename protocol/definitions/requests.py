"""The request a waiting human decision records, read as JSON without the model.

Owns recognising a request in a waiting run's output (``request_in``), its
text bounds and its answers as a person types them (``answer_forms``): what
``status``, ``sync`` and the other read-only views need, so that they load
neither the definition model nor ``dataclasses`` (the fast command line's
read commands must not: ``e2e/test_fastcli.py``). Building a request and
checking answers against one is ``protocol.definitions.decisions``. Imports
nothing of the package.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

REQUEST_KIND = "human_decision"
MAX_TEXT_CHARS = 20_000


def request_in(waiting_output: object) -> dict[str, Any] | None:
    """The request recorded in a waiting run's output, or None for a plain checkpoint."""
    if not isinstance(waiting_output, Mapping):
        return None
    request = waiting_output.get("request")
    if isinstance(request, Mapping) and request.get("kind") == REQUEST_KIND \
            and isinstance(request.get("choices"), list):
        return dict(request)
    return None


def _count(value: object, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def bounds(spec: Mapping[str, Any]) -> tuple[int, int]:
    """A text input's (min, max) characters; a damaged record reads as the widest bounds."""
    return _count(spec.get("minLength"), 0), _count(spec.get("maxLength"), MAX_TEXT_CHARS)


def answer_forms(request: Mapping[str, Any]) -> list[str]:
    """Each valid answer as a person types it: ``approve``, ``comment TEXT (1-500 characters)``."""
    forms = []
    for item in request.get("choices") or []:
        if not isinstance(item, Mapping):
            continue
        spec = item.get("text")
        if isinstance(spec, Mapping):
            low, high = bounds(spec)
            forms.append(f"{item.get('label')} TEXT ({low}-{high} characters)")
        else:
            forms.append(str(item.get("label")))
    return forms
