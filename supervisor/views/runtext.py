"""A run's title and its running node's status detail, as every view shows them.

Owns reading both from a run's projection (``title``: resolved once when the
run started; ``statusDetail``: only while its node runs) into the status
object (``status --json``, ``list --json``, ``sync``), and the few words each
human view adds for them, so ``list``, ``status``, ``watch``, ``sync`` and the
live view say the same. Both are author text, already bounded to one line by
the worker. Imports ``protocol.states`` only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...protocol.states import RunStatus


def text_fields(state: Mapping[str, Any], status: str | None) -> dict[str, Any]:
    """``title`` and ``statusDetail`` of a status object, from the projection."""
    title = state.get("title")
    detail = state.get("statusDetail")
    running = status == RunStatus.RUNNING and state.get("currentNode") is not None
    return {"title": title if isinstance(title, str) else None,
            "statusDetail": detail if isinstance(detail, str) and running else None}


def quoted(title: object) -> str:
    """A title as a view shows it beside the workflow's name (empty without one)."""
    return f'"{title}"' if isinstance(title, str) and title else ""


def with_title(text: str, info: Mapping[str, Any]) -> str:
    """``text`` followed by the run's quoted title, when it has one."""
    shown = quoted(info.get("title"))
    return f"{text}  {shown}" if shown else text


def detail_suffix(detail: object) -> str:
    """``: DETAIL`` after a running node's name (empty without one)."""
    return f": {detail}" if isinstance(detail, str) and detail else ""
