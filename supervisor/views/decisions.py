"""How a human decision's request is shown: status, watch, the live view and sync.

Owns the ``request`` (and, for a continuation, ``answeredWith`` and
``answeredBy``) keys of the ``status --json`` shape and the lines a person
reads: the question, who should answer, the valid answers as they are typed
and, with ``on_timeout``, when the host answers and with what. Only what the
definition asked is shown: never a typed answer's text. Imports
``protocol.definitions.requests`` and ``views.wording``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...protocol.definitions.requests import answer_forms, request_in
from .wording import cli

MAX_QUESTION_CHARS = 500


def _cut(text: object, most: int = MAX_QUESTION_CHARS) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= most else flat[: most - 1] + "…"


def status_fields(state: Mapping[str, Any], waiting: bool) -> dict[str, Any]:
    """``status --json`` keys: a waiting decision's request; who answered a continuation."""
    out: dict[str, Any] = {}
    if waiting:
        request = request_in(state.get("waitingOutput"))
        if request is not None:
            out["request"] = request
        waiting_output = state.get("waitingOutput")
        if isinstance(waiting_output, Mapping) and "data" in waiting_output:
            out["waitingData"] = waiting_output["data"]  # what checkpoint(run=) computed
    answer = state.get("answer")
    if state.get("parentRunId") and isinstance(answer, Mapping) \
            and isinstance(answer.get("choice"), str) and answer.get("by") in ("person", "timeout"):
        out.update(answeredWith=answer["choice"], answeredBy=answer["by"])
    return out


def due_text(due_ms: object) -> str:
    if not isinstance(due_ms, int) or isinstance(due_ms, bool):
        return "?"
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(due_ms / 1000))


def answers_text(request: Mapping[str, Any]) -> str:
    return " | ".join(answer_forms(request))


def request_line(request: Mapping[str, Any] | None) -> str:
    """One line: ``asks "QUESTION" (of AUDIENCE): approve | reject | other TEXT (...)``."""
    if request is None:
        return ""
    who = f" (of {_cut(request['audience'], 80)})" if request.get("audience") else ""
    line = f'asks "{_cut(request.get("question", ""))}"{who}: {answers_text(request)}'
    if request.get("onTimeout"):
        line += f"; unanswered by {due_text(request.get('dueAt'))}: {request['onTimeout']}"
    return line


def request_lines(request: Mapping[str, Any] | None, indent: str = "    ") -> list[str]:
    """The request for a person, several lines: the question, who, each answer."""
    if request is None:
        return []
    lines = [f"{indent}{_cut(request.get('question', ''))}"]
    if request.get("audience"):
        lines.append(f"{indent}who should answer: {_cut(request['audience'], 200)}")
    lines.append(f"{indent}answers:")
    forms = answer_forms(request)
    for form, item in zip(forms, request.get("choices") or [], strict=False):
        spec = item.get("text") if isinstance(item, Mapping) else None
        about = item.get("description") if isinstance(item, Mapping) else None
        if isinstance(spec, Mapping) and spec.get("prompt"):
            about = spec["prompt"]
        lines.append(f"{indent}  {form}" + (f" - {_cut(about, 200)}" if about else ""))
    if request.get("onTimeout"):
        lines.append(f"{indent}unanswered by {due_text(request.get('dueAt'))}, the host answers"
                     f" {request['onTimeout']}")
    return lines


def answer_steps(request: Mapping[str, Any] | None, run_id: str,
                 project: Path | None) -> list[tuple[str, str]]:
    """The ``answer`` command of a waiting decision (one of the answers listed), else []."""
    if request is None:
        return []
    return [("answer it with one of the answers above",
             cli(project, "answer", run_id, blank="ANSWER"))]


def answered_text(info: Mapping[str, Any]) -> str:
    """``answered by timeout with reject`` for a continuation of a decision; else empty."""
    by, label = info.get("answeredBy"), info.get("answeredWith")
    if not by or not label:
        return ""
    return f"answered by {'timeout' if by == 'timeout' else 'a person'} with {label}"
