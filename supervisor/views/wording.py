"""Plain words for people: durations, a step's output, what an event means, a command line.

Owns the phrasing the live view and ``logs`` share, so the runner's jargon
(effects, outcomes, error codes) reaches a person as a sentence. Pure
functions over trace payloads; no rich, no I/O. Imports ``protocol`` and
``views.timefmt``; never another wing.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from ...protocol.states import Outcome
from .timefmt import duration

# Error codes whose message speaks the runner's jargon: said in these words instead.
_CODE_WORDS = {
    "effect_indeterminate": "it was interrupted earlier while it ran and may or may not have"
                            " taken effect; it is not marked idempotent, so it was not run"
                            " again",
    "effect_conflict": "an earlier attempt recorded a different command for this step,"
                       " so it was neither reused nor run again",
}

_EFFECT_WORDS = {
    "replayed": "already done before the interruption: its recorded result is used, it is"
                " not run again",
    "indeterminate": "interrupted earlier while it ran; it may or may not have taken effect"
                     " and is not marked idempotent, so it is not run again",
    "conflict": "an earlier attempt ran a different command here; it is not run again",
}

_OUTCOME_WORDS: dict[str, str] = {Outcome.OK: "done", Outcome.FAILED: "failed",
                  Outcome.TIMED_OUT: "timed out", Outcome.CANCELLED: "stopped"}


def duration_text(ms: float) -> str:
    """``0.4 s``, ``12.3 s``, ``2 min 05 s``, ``1 h 02 min``: tenths tick below a minute."""
    seconds = max(0.0, ms / 1000)
    if seconds < 60:  # a ticking clock shows tenths, even under a second
        return f"{seconds:.1f} s"
    return duration(ms)


def outcome_word(outcome: str | None) -> str:
    return _OUTCOME_WORDS.get(str(outcome), str(outcome or "ended"))


def error_text(code: str | None, message: str | None) -> str:
    """The error as a person reads it; the code stays, in brackets, for searching."""
    words = _CODE_WORDS.get(code or "")
    text = message or "it failed"
    if words:
        where = text.split(": ", 1)[0] + ": " if text.startswith("node '") else ""
        text = where + words
    return f"{text} [{code}]" if code else text


def effect_note(effect: str | None) -> str | None:
    """A sentence for an ``effect_recorded`` event worth telling, or None (the usual ones)."""
    return _EFFECT_WORDS.get(effect or "")


def shell_output(value: Any) -> bool:
    return isinstance(value, dict) and "exitCode" in value and "stdout" in value


def notify_message(value: Any) -> str | None:
    if isinstance(value, dict) and set(value) == {"message", "kind"}:
        return str(value["message"])
    return None


def person_text(value: Any) -> str:
    """A step's or run's output for a person: a message as text, a command's output as
    its lines, an object as ``key: value`` lines, anything else as indented JSON."""
    message = notify_message(value)
    if message is not None:
        return message
    if isinstance(value, str):
        return value
    if shell_output(value):
        parts = [str(value.get("stdout") or "").rstrip("\n")]
        if value.get("stderr"):
            parts.append(str(value["stderr"]).rstrip("\n"))
        return "\n".join(p for p in parts if p) or f"(no output; exit code {value['exitCode']})"
    if value is None:
        return "(no output)"
    if isinstance(value, dict) and value and all(isinstance(k, str) for k in value):
        return "\n".join(f"{k}: {_scalar(v)}" for k, v in value.items())
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


def _scalar(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def cli(project: Path | None, *words: str, blank: str | None = None) -> str:
    """An exact ``pi-workflows`` command line, with ``--project`` when it is not here;
    ``blank`` is a part the person fills in, shown unquoted after the words."""
    line = " ".join(["pi-workflows", *(shlex.quote(w) for w in words)])
    if blank:
        line += f" {blank}"
    if project is not None and project.resolve() != Path.cwd().resolve():
        line += f" --project {shlex.quote(str(project))}"
    return line
