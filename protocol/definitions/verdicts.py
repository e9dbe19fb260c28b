"""What an agent node's ``validate`` may return: accept, refuse, or replace (issue 23, item 7).

Owns ``Replace`` (the one way to hand back a replacement output) and
``read_verdict``, which both agent judges (the headless executor's and the
in-session one, through ``worker.steps``) use to read a ``validate`` result
the same way: ``None`` (or another false value) accepts the submission, a
``str`` refuses it with that reason (as before; any other true value
refuses with its ``str``, as before too), and ``Replace(value)`` accepts it
with ``value`` as the node's output instead. Imports nothing from the package.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Replace:
    """Returned by an agent node's ``validate``: accept, with ``value`` as the node's output."""

    value: Any


@dataclass(frozen=True)
class Verdict:
    """A ``validate`` result read: ``refusal`` (None when accepted), and the output to keep."""

    refusal: str | None
    replaced: bool = False
    value: Any = None


def read_verdict(result: object) -> Verdict:
    """``validate``'s return value as a verdict (see the module docstring)."""
    if isinstance(result, Replace):
        return Verdict(None, True, result.value)
    if not result:
        return Verdict(None)
    return Verdict(str(result))
