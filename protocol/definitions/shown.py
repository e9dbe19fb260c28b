"""Text shown about a run while it is listed or followed: its title and node status details.

Owns the definition rules of ``define_workflow(title=...)`` and of a node's
``status_detail=`` (text, or a function; bounded), and ``shown_text``, the
one normalisation both go through at run time (one line, cut to its bound),
so what ``list``, ``status``, ``watch`` and the Pi footer show is the same
everywhere. Imports ``protocol.definitions.graph`` only.
"""

from __future__ import annotations

from .graph import MAX_TITLE_CHARS, Node

MAX_STATUS_DETAIL_CHARS = 200


def title_problem(title: object) -> str | None:
    """The problem with a workflow's ``title``, if any."""
    if title is None or callable(title):
        return None
    if not isinstance(title, str):
        return f"title must be text or a function of the input, got {type(title).__name__}"
    if not title.strip():
        return "title must not be empty (leave it out instead)"
    if len(title) > MAX_TITLE_CHARS:
        return f"title is longer than {MAX_TITLE_CHARS} characters ({len(title)})"
    return None


def status_detail_problem(node: Node, where: str | None = None) -> str | None:
    """The problem with a node's ``status_detail``, if any (``where`` names the node)."""
    detail = getattr(node, "status_detail", None)
    if detail is None or callable(detail):
        return None
    where = where or f"{node.kind} node {node.id!r}"
    if not isinstance(detail, str):
        return (f"{where}: status_detail must be text or a callable of ctx,"
                f" got {type(detail).__name__}")
    if not detail.strip():
        return f"{where}: status_detail is empty (leave it out instead)"
    if len(detail) > MAX_STATUS_DETAIL_CHARS:
        return (f"{where}: status_detail is longer than {MAX_STATUS_DETAIL_CHARS} characters"
                f" ({len(detail)})")
    return None


def shown_text(value: object, limit: int) -> str | None:
    """``value`` as one line of at most ``limit`` characters; None for no text."""
    if not isinstance(value, str):
        return None
    text = " ".join(value.split())
    if not text:
        return None
    return text if len(text) <= limit else text[:limit - 1] + "…"
