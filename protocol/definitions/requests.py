"""The request a waiting human decision records, read as JSON without the model.

Owns recognising a request in a waiting run's output (``request_in``), its
text bounds, its answers as a person types them (``answer_forms``) and
checking an answer against it (``decide``), which the command line, the Pi
extension (through it) and the host's ``on_timeout`` share: what ``status``,
``sync``, ``answer`` and the host need, so that the read-only views load
neither the definition model nor ``dataclasses`` (the fast command line's read
commands must not: ``e2e/test_fastcli.py``). Building a request is
``protocol.definitions.decisions``. Imports ``protocol.errors`` only.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..errors import UsageError

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


class AnswerRefused(UsageError):
    """An answer that is not one of a human decision's valid answers; nothing was queued."""

    code = "answer_invalid"


def _refuse(run_id: str, why: str, request: Mapping[str, Any]) -> AnswerRefused:
    # What was given is never repeated: an answer is private like run input.
    return AnswerRefused(f"{why}; run {run_id} takes one of: "
                         + ", ".join(answer_forms(request)))


_WORDS = r"^\s*([^\s:]+)\s*(?::\s*|\s+|$)(.*)$"


def _given(value: Any) -> tuple[str, str | None] | None:
    """(the label, the text or None) of an answer as words or as JSON; None if neither."""
    if isinstance(value, str):
        found = re.match(_WORDS, value, re.DOTALL)
        if found is None:
            return None
        rest = found.group(2).strip()
        return found.group(1), rest or None
    if isinstance(value, Mapping) and set(value) <= {"choice", "text"} \
            and isinstance(value.get("choice"), str):
        text = value.get("text")
        if text is not None and not isinstance(text, str):
            return None
        return value["choice"], text
    return None


def decide(request: Mapping[str, Any], value: Any, run_id: str, *,
           by: str = "person") -> dict[str, Any]:
    """The answer object for ``value`` (words or JSON), or ``AnswerRefused`` with the valid ones."""
    given = _given(value)
    if given is None:
        why = "that is not an answer to this decision"
        if isinstance(value, Mapping):  # which keys, never their values
            why = ('as JSON, an answer is {"choice": LABEL} or {"choice": LABEL,'
                   ' "text": TEXT}, nothing else')
        elif isinstance(value, str):
            why = "the answer is empty"
        raise _refuse(run_id, why, request)
    label, text = given
    answers = [a for a in request.get("choices") or [] if isinstance(a, Mapping)]
    picked = next((a for a in answers if a.get("label") == label), None) or next(
        (a for a in answers if str(a.get("label")).lower() == label.lower()), None)
    if picked is None:
        raise _refuse(run_id, "that is not one of the answers", request)
    name = str(picked["label"])
    spec = picked.get("text")
    if not isinstance(spec, Mapping):
        if text is not None:
            raise _refuse(run_id, f"answer {name!r} takes no text", request)
        answer: dict[str, Any] = {"choice": name, "by": by}
        if picked.get("input") is not None:
            answer["input"] = picked["input"]
        return answer
    low, high = bounds(spec)
    typed = text or ""
    if not low <= len(typed) <= high:
        raise _refuse(run_id, f"the text of {name!r} must be {low}-{high} characters"
                              f" (it has {len(typed)})", request)
    return {"choice": name, "text": typed, "by": by}
